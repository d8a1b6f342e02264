#!/usr/bin/env bash
# Check the retained-job-output protocol model (correctness/awa_job_output.pml)
# with Spin: the positive configuration must verify exhaustively with no
# errors, each of the seven negative configurations must produce a
# counterexample, and each reachability probe must reach its scenario (so the
# positive result is not vacuous).
#
# usage: bash correctness/check.sh [--deep] [--trails] [--keep]
#   --deep    also check the positive model with 3 attempts (about 10 s, 0.5 GB)
#   --trails  print the (shortest) counterexample of each negative config
#   --keep    keep the temporary work directory
#
# Requires `spin` and `cc` on PATH; installs nothing.  Works in a temporary
# directory, never in the repository.
set -euo pipefail

deep=0
trails=0
keep=0
for arg in "$@"; do
    case "$arg" in
        --deep) deep=1 ;;
        --trails) trails=1 ;;
        --keep) keep=1 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "check.sh: unknown argument: $arg" >&2; exit 2 ;;
    esac
done

missing=0
for tool in spin cc; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "check.sh: '$tool' is not on PATH." >&2
        missing=1
    fi
done
if [ "$missing" -ne 0 ]; then
    echo "check.sh: install them first, e.g. on Debian/Ubuntu: apt-get install -y spin gcc" >&2
    exit 1
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="$here/awa_job_output.pml"
if [ ! -f "$model" ]; then
    echo "check.sh: model not found: $model" >&2
    exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/awa-output-model.XXXXXX")"
cleanup() {
    if [ "$keep" -eq 1 ]; then
        echo "work directory kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

# name | spin defines | expectation | pan compile flags
#   positive: depth-first, exhaustive, state compression
#   negative: breadth-first, so the counterexample found is a shortest one
#   -DNO_CANCEL: configurations whose scenario needs no operator cancel leave it
#   out (a third of the states); the cancel only adds behaviours, so their
#   counterexamples and reached goals hold with it too
configs=(
    "positive||pass|-O1 -DSAFETY -DCOLLAPSE"
    "NEG_WRITE_ON_RECORD|-DNEG_WRITE_ON_RECORD -DNO_CANCEL|fail|-O0 -DSAFETY -DBFS"
    "NEG_WRITE_AFTER_COMMIT|-DNEG_WRITE_AFTER_COMMIT -DNO_CANCEL|fail|-O0 -DSAFETY -DBFS"
    "NEG_DRAIN_FIRST_SEND|-DNEG_DRAIN_FIRST_SEND -DNO_CANCEL|fail|-O0 -DSAFETY -DBFS"
    "NEG_DROP_COMPACT|-DNEG_DROP_COMPACT -DNO_CANCEL|fail|-O0 -DSAFETY -DBFS"
    "NEG_NO_LEASE_GUARD|-DNEG_NO_LEASE_GUARD -DNO_CANCEL|fail|-O0 -DSAFETY -DBFS"
    "NEG_CLAIM_SNAPSHOT|-DNEG_CLAIM_SNAPSHOT|fail|-O0 -DSAFETY -DBFS"
    "NEG_CANCEL_SNAPSHOT|-DNEG_CANCEL_SNAPSHOT|fail|-O0 -DSAFETY -DBFS"
)
# reachability (vacuity) probes on the positive model: each scenario must be
# reachable, so the invariants are not satisfied vacuously
configs+=(
    "reach:compact-output|-DREACH=1 -DNO_CANCEL|reach|-O0 -DSAFETY -DBFS"
    "reach:retry-commits|-DREACH=2 -DNO_CANCEL|reach|-O0 -DSAFETY -DBFS"
    "reach:strip-earlier|-DREACH=3 -DNO_CANCEL|reach|-O0 -DSAFETY -DBFS"
    "reach:rescue-keeps|-DREACH=4 -DNO_CANCEL|reach|-O0 -DSAFETY -DBFS"
    "reach:external-wins|-DREACH=5 -DNO_CANCEL|reach|-O0 -DSAFETY -DBFS"
    "reach:superseded-stale|-DREACH=6 -DNO_CANCEL|reach|-O0 -DSAFETY -DBFS"
    "reach:claim-loses|-DREACH=7|reach|-O0 -DSAFETY -DBFS"
    "reach:cancel-stales|-DREACH=8|reach|-O0 -DSAFETY -DBFS"
)
if [ "$deep" -eq 1 ]; then
    configs+=("positive-3-attempts|-DMAXL=3 -DNV=1|pass|-O2 -DSAFETY -DCOLLAPSE")
fi

now() { date +%s.%N; }

# condensed replay of a trail: step, process, model line, statement; a
# `skip` branch is shown with the comment on its model line, which names it
# (e.g. "connection lost before commit: rolled back")
condense_trail() {
    awk -v model="$1" '
        BEGIN { n = 0; while ((getline l < model) > 0) src[++n] = l }
        /^ *VIOLATED/ { sub(/^[ \t]*/, ""); print "      => " $0; next }
        match($0, /^ *[0-9]+:[ \t]+proc +[0-9]+ \([A-Za-z]+:[0-9]+\) [^ ]+:[0-9]+ \(state [0-9]+\)[ \t]+\[.*\]$/) {
            line = $0
            sub(/^ */, "", line)
            split(line, a, /[ \t]+/)
            step = a[1]; sub(/:$/, "", step); pid = a[3]; name = a[4]
            gsub(/[()]/, "", name); sub(/:[0-9]+$/, "", name)
            if (name == "Monitor" || name == "Reach") next
            loc = a[5]; sub(/^.*:/, "", loc)
            stmt = line; sub(/^[^[]*\[/, "", stmt); sub(/\]$/, "", stmt)
            if (stmt == "(1)") {
                c = src[loc + 0]
                if (c !~ /\/\*/) next
                sub(/^.*\/\*[ \t]*/, "", c); sub(/[ \t]*\*\/.*$/, "", c)
                stmt = "skip  -- " c
            }
            printf "      %4s  %-13s l%-4s %s\n", step, name "#" pid, loc, stmt
        }
    '
}

# run_config NAME DEFINES EXPECT CFLAGS: writes $work/NAME/result as
# "name|expect|result|states|time|verdict"
run_config() {
    local name="$1" defines="$2" expect="$3" cflags="$4"
    local dir="$work/$name" t0 t1 out errors states secs incomplete result verdict violated
    mkdir -p "$dir"
    cp "$model" "$dir/awa_job_output.pml"
    t0="$(now)"
    # shellcheck disable=SC2086
    if ! (cd "$dir" && spin -a $defines awa_job_output.pml >spin.log 2>&1); then
        echo "$name|$expect|ERROR: spin -a failed (see spin.log)|-|-|MISMATCH" >"$dir/result"
        return 0
    fi
    # shellcheck disable=SC2086
    if ! (cd "$dir" && cc -w $cflags -o pan pan.c >cc.log 2>&1); then
        echo "$name|$expect|ERROR: cc failed (see cc.log)|-|-|MISMATCH" >"$dir/result"
        return 0
    fi
    (cd "$dir" && ./pan -m100000 >pan.log 2>&1) || true
    t1="$(now)"
    out="$dir/pan.log"
    errors="$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$out" | head -n1)"
    states="$(awk '/states, stored/ { print $1; exit }' "$out")"
    secs="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2fs", b - a }')"
    if [ -z "$errors" ] || [ -z "$states" ]; then
        echo "$name|$expect|ERROR: unreadable pan.log|-|$secs|MISMATCH" >"$dir/result"
        return 0
    fi
    incomplete=""
    if grep -q -e 'max search depth too small' -e 'out of memory' -e 'search not completed' "$out"; then
        incomplete=" (search incomplete)"
    fi
    if [ "$expect" = reach ]; then
        # the probe's assertion must fail, and no invariant may fail on the way
        # shellcheck disable=SC2086
        violated="$(cd "$dir" && spin -t $defines awa_job_output.pml 2>/dev/null \
                    | sed -n 's/^ *VIOLATED \(I[0-9]\).*/\1/p' | sort -u | paste -sd, -)"
        if [ "$errors" -gt 0 ] && [ -z "$violated" ]; then
            result="reached"; verdict=ok
        elif [ -n "$violated" ]; then
            result="invariant failed ($violated)"; verdict=MISMATCH
        else
            result="NOT reached$incomplete"; verdict=MISMATCH
        fi
        echo "$name|$expect|$result|$states|$secs|$verdict" >"$dir/result"
        return 0
    fi
    if [ "$errors" -eq 0 ]; then
        result="no errors$incomplete"
        if [ "$expect" = pass ] && [ -z "$incomplete" ]; then verdict=ok; else verdict=MISMATCH; fi
    else
        # shellcheck disable=SC2086
        violated="$(cd "$dir" && spin -t $defines awa_job_output.pml 2>/dev/null \
                    | sed -n 's/^ *VIOLATED \(I[0-9]\).*/\1/p' | sort -u | paste -sd, -)"
        result="counterexample (${violated:-assertion/deadlock})"
        if [ "$expect" = fail ]; then verdict=ok; else verdict=MISMATCH; fi
        # shellcheck disable=SC2086
        (cd "$dir" && spin -t -p $defines awa_job_output.pml 2>/dev/null) \
            | condense_trail "$dir/awa_job_output.pml" >"$dir/trail.txt"
    fi
    echo "$name|$expect|$result|$states|$secs|$verdict" >"$dir/result"
}

# two configurations at a time (the searches are single-threaded)
jobs_max="$(nproc 2>/dev/null || echo 2)"
[ "$jobs_max" -gt 2 ] && jobs_max=2
total_start="$(now)"
pids=()
names=()
for entry in "${configs[@]}"; do
    IFS='|' read -r name defines expect cflags <<<"$entry"
    names+=("$name")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
        wait -n || true
    done
    run_config "$name" "$defines" "$expect" "$cflags" &
    pids+=("$!")
done
for pid in "${pids[@]}"; do
    wait "$pid" || true
done
total_end="$(now)"

rc=0
results=()
for name in "${names[@]}"; do
    dir="$work/$name"
    if [ -f "$dir/result" ]; then
        line="$(cat "$dir/result")"
    else
        line="$name|?|ERROR: no result|-|-|MISMATCH"
    fi
    results+=("$line")
    verdict="${line##*|}"
    if [ "$verdict" != ok ]; then
        rc=1
        keep=1
    fi
    if [ -f "$dir/trail.txt" ] && { [ "$trails" -eq 1 ] || [ "$verdict" != ok ]; }; then
        echo "---- $name: counterexample (condensed replay of spin -t -p)"
        cat "$dir/trail.txt"
    fi
done

fmt="%-22s | %-9s | %-24s | %15s | %7s | %s\n"
printf "$fmt" "config" "expected" "result" "states explored" "time" "verdict"
printf "$fmt" "----------------------" "---------" "------------------------" "---------------" "-------" "--------"
for r in "${results[@]}"; do
    IFS='|' read -r name expect result states secs verdict <<<"$r"
    case "$expect" in pass) e="no error" ;; reach) e="reachable" ;; *) e="error" ;; esac
    printf "$fmt" "$name" "$e" "$result" "$states" "$secs" "$verdict"
done
awk -v a="$total_start" -v b="$total_end" -v j="$jobs_max" \
    'BEGIN { printf "total: %.1fs wall, %d configs at a time (time = spin -a + cc + pan; the positive search is exhaustive, the others stop at their first, shortest counterexample)\n", b - a, j }'
if [ "$rc" -eq 0 ]; then
    echo "all expectations met"
else
    echo "EXPECTATION FAILED" >&2
fi
exit "$rc"
