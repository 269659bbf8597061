#!/usr/bin/env bash
# Publishes a build to Buildshelf from a GitHub Actions job with trusted publishing: the job's
# OIDC token, requested for Buildshelf's public URL, is the credential, and there is no
# secret. The Action (action.yml, at the repository's root) runs it; a workflow may run a
# copy of it as well (docs/publishing.md, "GitHub Actions: trusted publishing"). Its inputs
# are in the environment:
#
#   BUILDSHELF_URL            Buildshelf's public URL (its --public-url): where to publish,
#                             and the token's audience
#   BUILDSHELF_PROJECT        the project's slug
#   BUILDSHELF_FILE           the build's file
#   BUILDSHELF_CHANNEL        its channel (channelVersion)
#   BUILDSHELF_BUILD_NUMBER   its number (default: GITHUB_RUN_NUMBER)
#   BUILDSHELF_EXPERIMENTAL   true, or false (the default)
#   BUILDSHELF_FIELDS         more of the build's JSON, an object (default: {})
#   BUILDSHELF_EXTRA_FILES    its extra files to keep, one KEY=PATH a line
#   BUILDSHELF_COMMITS_SINCE  the commit before its first one (default: none, and the build
#                             has the job's commit alone)
#
# and the runner's: ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN (set only
# for a job with `permissions: id-token: write`), GITHUB_SERVER_URL, GITHUB_REPOSITORY,
# GITHUB_RUN_ID, GITHUB_RUN_NUMBER, GITHUB_RUN_ATTEMPT, GITHUB_SHA and RUNNER_TEMP.
#
# Each attempt asks GitHub for a fresh token (Buildshelf accepts a token once), then PUTs the
# build. No answer at all, a 429, or a 502, 503 or 504 (Buildshelf restarting behind its
# proxy, or GitHub's keys out of its reach; from GitHub's token endpoint, any 5xx) is tried
# again, ATTEMPTS times at most, PAUSE seconds longer before each; any other answer is final.
# A re-run of a workflow run (GITHUB_RUN_ATTEMPT 2 and on: the same run number, the file
# built again) replaces the build its first attempt published (?replace=true).
set -euo pipefail

ATTEMPTS=5
PAUSE=10  # seconds: 10 before the second attempt, 20 before the third...
ANSWER_BYTES=2000  # of an answer, printed on one line

annotated() {  # a workflow command's message: GitHub reads %, CR and LF escaped
    local text=${1//'%'/'%25'}
    text=${text//$'\r'/'%0D'}
    echo "${text//$'\n'/'%0A'}"
}

fail() {  # the job's error, shown on the run's page too
    echo "::error title=Buildshelf::$(annotated "$*")" >&2
    exit 1
}

warn() {
    echo "::warning title=Buildshelf::$(annotated "$*")" >&2
}

for tool in curl jq git; do
    command -v "$tool" >/dev/null || fail "this step needs $tool on the runner's PATH"
done

# --- the inputs, each checked before anything is sent ---------------------------------------

url=${BUILDSHELF_URL:-}
while [[ $url == */ ]]; do  # a --public-url has no trailing slash: the audience is it exactly
    url=${url%/}
done
if ! [[ $url =~ ^https?://[^/?#[:space:]]+[^?#[:space:]]*$ ]]; then
    fail "url: '${BUILDSHELF_URL:-}' is not Buildshelf's public URL (its --public-url, such as https://builds.example.org)"
fi
project=${BUILDSHELF_PROJECT:-}
[[ $project =~ ^[a-z0-9][a-z0-9._-]*$ ]] ||
    fail "project: '$project' is not a project's slug (lower-case letters, digits, . _ -)"
build=${BUILDSHELF_BUILD_NUMBER:-${GITHUB_RUN_NUMBER:-}}
[[ $build =~ ^[0-9]{1,18}$ ]] || fail "build-number: '$build' is not a whole number"
channel=${BUILDSHELF_CHANNEL:-}
[ -n "$channel" ] || fail "channel: give the build's channel, such as 1.21.4"
experimental=${BUILDSHELF_EXPERIMENTAL:-false}
[[ $experimental == true || $experimental == false ]] ||
    fail "experimental: '$experimental' is neither true nor false"
fields=${BUILDSHELF_FIELDS:-}
fields=${fields:-"{}"}
jq -en --argjson fields "$fields" '$fields | type == "object"' >/dev/null 2>&1 ||
    fail "fields: not a JSON object: $fields"

parts=()
add_part() {  # the file $2 sent as the part $1 (input $3): its name quoted, for curl -F's , and ;
    [ -f "$2" ] && [ -r "$2" ] || fail "$3: '$2' is not a file that can be read here ($PWD)"
    [[ $2 != *[\"\\]* ]] || fail "$3: '$2': a file name with \" or \\ cannot be sent by curl -F"
    parts+=(-F "$1=@\"$2\"")
}

add_part file "${BUILDSHELF_FILE:-}" file
while IFS= read -r line; do
    [[ $line =~ ^[[:space:]]*(.*[^[:space:]])[[:space:]]*$ ]] || continue  # a blank line
    line=${BASH_REMATCH[1]}
    key=${line%%=*}
    [[ $line == *=* && $key =~ ^[a-z0-9-]+:[a-z0-9-]+$ ]] ||
        fail "extra-files: '$line' is not KEY=PATH, such as server:mojmap=build/libs/x-mojmap.jar"
    add_part "download:$key" "${line#*=}" extra-files
done <<<"${BUILDSHELF_EXTRA_FILES:-}"

if [ -z "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ] || [ -z "${ACTIONS_ID_TOKEN_REQUEST_TOKEN:-}" ]; then
    fail "this job may not ask GitHub for an OIDC token (ACTIONS_ID_TOKEN_REQUEST_URL and" \
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN are not set): give it 'permissions: id-token: write'" \
        "(a job's permissions replace the workflow's; a pull request from a fork never has it)"
fi

# --- the build's JSON, the token's URL, the build's ----------------------------------------

tmp=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/buildshelf.XXXXXXXX")
trap 'rm -rf "$tmp"' EXIT

range=(-1 "${GITHUB_SHA:-HEAD}")  # a new branch's push (before: zeros), a tag's, a manual run
since=${BUILDSHELF_COMMITS_SINCE:-}
if [[ -n $since && $since != -* ]] && git cat-file -e "$since^{commit}" 2>/dev/null; then
    range=("$since..${GITHUB_SHA:-HEAD}")
fi
if ! git log --format='%H %s' "${range[@]}" >"$tmp/commits" 2>/dev/null; then
    warn "no commits sent: the workspace is not a checkout of ${GITHUB_SHA:-HEAD}"
    : >"$tmp/commits"
fi
jq -Rn --arg channel "$channel" --argjson experimental "$experimental" \
    --arg url "${GITHUB_SERVER_URL:-}/${GITHUB_REPOSITORY:-}/actions/runs/${GITHUB_RUN_ID:-}" \
    --argjson fields "$fields" \
    '{channelVersion: $channel, url: $url, isExperimental: $experimental,
      commits: [inputs | capture("^(?<hash>[0-9a-f]+) (?<message>.*)$")]} + $fields' \
    <"$tmp/commits" >"$tmp/build.json"

case $ACTIONS_ID_TOKEN_REQUEST_URL in
    *\?*) token_url="$ACTIONS_ID_TOKEN_REQUEST_URL&" ;;
    *) token_url="$ACTIONS_ID_TOKEN_REQUEST_URL?" ;;
esac
token_url+="audience=$(jq -rn --arg url "$url" '$url | @uri')"
build_url="$url/api/v2/projects/$project/builds/$build"
attempt_of_run=${GITHUB_RUN_ATTEMPT:-1}
if [[ $attempt_of_run =~ ^[0-9]+$ ]] && ((attempt_of_run > 1)); then
    build_url+="?replace=true"  # this run's first attempt published the number: replace it
fi

# --- the attempts ------------------------------------------------------------------------------

say() {  # what this attempt got: never what an earlier one did
    echo "attempt $attempt of $ATTEMPTS: $*"
}

shown() {  # the answer this attempt received (no file: none), on one line
    [ -s "$tmp/answer" ] && echo ": $(head -c "$ANSWER_BYTES" "$tmp/answer" | tr -s '\r\n' '  ')"
    return 0
}

error() {  # why curl had no answer, from its stderr
    head -c "$ANSWER_BYTES" "$tmp/error" | tr -s '\r\n' '  '
}

request() {  # curl with the header line on stdin (never on a command line); prints the status
    rm -f "$tmp/answer" "$tmp/error"
    curl -sS -H @- --connect-timeout 10 -o "$tmp/answer" -w '%{http_code}' "$@" 2>"$tmp/error" ||
        true
}

oidc_token() {  # a fresh token in `token`; returns 2 when it is worth asking again
    local status
    status=$(echo "Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN" |
        request --max-time 60 "$token_url")
    case $status in
        200)
            token=$(jq -r '.value // empty' "$tmp/answer" 2>/dev/null) || token=""
            rm -f "$tmp/answer"  # the token: never printed, never left on disk
            [ -n "$token" ] || fail "GitHub's token endpoint answered 200 with no token" ;;
        000) say "no answer from GitHub's token endpoint: $(error)"; return 2 ;;
        408 | 429 | 5??) say "GitHub's token endpoint answered $status$(shown)"; return 2 ;;
        *)
            say "GitHub's token endpoint answered $status$(shown)"
            fail "GitHub refused this job an OIDC token ($status)" ;;
    esac
}

publish() {  # the build PUT with `token`; returns 2 when it is worth trying again
    local status
    status=$(echo "Authorization: Bearer $token" |
        request -X PUT --speed-limit 1 --speed-time 120 "${parts[@]}" \
            -F "build=<\"$tmp/build.json\";type=application/json" "$build_url")
    case $status in
        200 | 201)
            say "Buildshelf answered $status: build $build of $project published"
            jq -c . "$tmp/answer" 2>/dev/null || shown
            return 0 ;;
        000) say "no answer from Buildshelf: $(error)"; return 2 ;;
        429 | 502 | 503 | 504) say "Buildshelf answered $status$(shown)"; return 2 ;;
    esac
    say "Buildshelf answered $status$(shown)"
    case $status in
        401) fail "Buildshelf refused the token: is url its --public-url exactly?" ;;
        403) fail "Buildshelf refused this job: is its repository trusted for $project?" ;;
        409) fail "Buildshelf refused build $build of $project: what it said is above (a re-run" \
            "of a workflow run replaces the build of its first attempt; a first attempt replaces" \
            "none: does another workflow publish the same numbers? give it its own build-number)" ;;
        *) fail "Buildshelf answered $status: what it said is above" ;;
    esac
}

for ((attempt = 1; attempt <= ATTEMPTS; attempt++)); do
    if ((attempt > 1)); then
        sleep $((PAUSE * (attempt - 1)))
    fi
    outcome=0
    oidc_token || outcome=$?
    if ((outcome == 0)); then
        publish || outcome=$?
    fi
    case $outcome in
        0) exit 0 ;;
        2) ;;  # worth another attempt
        *) exit 1 ;;
    esac
done
fail "gave up after $ATTEMPTS attempts: what each got is above"
