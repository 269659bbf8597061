"""Synthetic data for the benchmarks: projects of many builds with three commits each."""

import hashlib
import json
import os
import random

# Twenty projects, p00..p19, of 500 to 2,000 builds: bench/run.py's data, and bench/nginx.py's.
TWENTY_SIZES = [500 + round(i * 1500 / 19) for i in range(20)]

WORDS = (
    "fix update chunk entity player world packet tick cache async region light "
    "command config plugin api event scheduler crash leak login proxy"
).split()


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
                "message": " ".join(rng.choice(WORDS) for _ in range(6)).capitalize(),
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
