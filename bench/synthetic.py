"""Synthetic data for the benchmarks: projects of many builds with three commits each, whose
messages differ as real ones do (a subject of 5 to 11 words, a sixth of them with a body too:
65 characters on average, none repeated in 300,000)."""

import hashlib
import json
import os
import random

# Twenty projects, p00..p19, of 500 to 2,000 builds: bench/run.py's data, and bench/nginx.py's.
TWENTY_SIZES = [500 + round(i * 1500 / 19) for i in range(20)]

VERBS = (
    "Fix Add Update Remove Rework Bump Improve Handle Avoid Allow Check Document Log Move "
    "Rename Restore Revert Simplify Skip Support Test Cache Refactor Expose Deprecate"
).split()
WORDS = (
    "chunk entity player world packet tick cache async region light command config plugin api "
    "event scheduler crash leak login proxy loading race teleport inventory block item biome "
    "spawn redstone hopper portal recipe permission console message null pointer exception "
    "thread lock deadlock timeout retry buffer overflow offset index map list queue sync save "
    "load unload shutdown startup reload mob villager trade enchantment potion armor damage "
    "knockback velocity gravity collision bounding box heightmap lighting engine generator "
    "structure schematic metadata registry codec json yaml gradle build test docs javadoc "
    "when while after before during with without on in for from to the a of and"
).split()


def message(rng):
    """A commit message: a subject of 5 to 11 words, and in a sixth of them a body of 6 to 16
    words; with this many words, 300,000 messages never repeat one (startup.py checks)."""
    subject = " ".join([rng.choice(VERBS), *(rng.choice(WORDS) for _ in range(rng.randint(4, 10)))])
    if rng.random() < 1 / 6:
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16)))
        return f"{subject}\n\n{body.capitalize()}."
    return subject


def build(rng, number, channel, experimental):
    return {
        "buildNumber": number,
        "url": f"https://ci.example.org/job/Project/{number}/",
        "downloadUrl": f"https://ci.example.org/job/Project/{number}/artifact/project-{channel}-"
        f"{number}.jar",
        "channelVersion": channel,
        "timestamp": 1_700_000_000_000 + number * 3_600_000,
        "isExperimental": experimental,
        "commits": [
            {
                "message": message(rng),
                "hash": f"{rng.getrandbits(160):040x}",
            }
            for _ in range(3)
        ],
    }


def with_integrity(build):
    """`build` with a sha256 and a size, as `buildshelf publish --sha256 --size` writes them."""
    digest = hashlib.sha256(str(build["buildNumber"]).encode()).hexdigest()
    return dict(build, sha256=digest, size=1_000_000 + build["buildNumber"])


def project(slug, builds):
    return {
        "ciJob": slug.title(),
        "ciJobUrl": f"https://ci.example.org/job/{slug}/",
        "javadocBaseUrl": f"https://jd.example.org/{slug}/",
        "builds": builds,
    }


def channel_builds(rng, start, channels):
    """Builds numbered from `start`, `count` per (channel, count); every tenth experimental."""
    builds, number = [], start
    for channel, count in channels:
        for i in range(count):
            builds.append(build(rng, number, channel, i % 10 == 9))
            number += 1
    return builds


def write_project(directory, slug, builds):
    path = os.path.join(directory, f"{slug}.json")
    with open(path, "w") as f:
        json.dump(project(slug, builds), f, indent=2)
    return path


def generate(directory, sizes, seed=1):
    """One project per size, named p00, p01...; each spreads its builds over 4 channels, the
    third of which always has 333 builds (300 stable): the ~150 KB list the benchmark asks for."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    for i, size in enumerate(sizes):
        rest = size - 333
        channels = [
            ("1.19", rest // 3),
            ("1.20", rest // 3),
            ("1.21", 333),
            ("1.22", rest - 2 * (rest // 3)),
        ]
        write_project(directory, f"p{i:02d}", channel_builds(rng, 1, channels))
    return directory
