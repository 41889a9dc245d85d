#!/usr/bin/env bash
# Certify PyTorch's own CUDA autocast in every certified mode, in one call of a lent GPU machine.
#
#   benchmarks/gpu_certify.sh --fetch-wheels     here, once: the wheels the GPU machine lacks, into .whl/
#   benchmarks/gpu_certify.sh [--out DIR]        on the GPU machine (DIR defaults to $OUT): about 9 minutes
#   benchmarks/gpu_certify.sh --dry-run          here, on the CPU: the same steps, policy-only, within 172 s
#
# Steps, in order of value, each a certification (`pytest --certify`: every test in an xdist worker
# with a per-test timeout, so a segfault is a `crash` and a hang a `timeout`, never the run's end)
# of `--backend cuda --dtype all`:
#   eager     the eager suite (real kernels)
#   inductor  --mode compile --compile-backend inductor (its default and emulate_precision_casts passes)
#   export    --mode export (strict and non-strict, and run_decompositions)
#   aoti      --mode aoti (AOTInductor packages)
# Every step re-runs the eager categories: --certify runs the whole suite and refuses -m.
#
# Time: each step has a share of wall clock. It is interrupted (SIGINT: the run writes its bundle
# with the results it has) when its share, less the seconds that writing takes, is spent, and
# killed at the end of its share. A step that ends early passes what it did not use to the next;
# a step that runs long cannot take the next one's. Each bundle is checked by
# `autocast-spec verify-bundle` while the next step runs.
#
# Output (DIR, within what a lent machine sends back: at most 8 files, none over 16 MiB):
#   summary.md, summary.json   per step: status, counts, wall time, verdict; torch build, device name
#   gpu_certify.log            this script's own log
#   <step>.tar.gz              the step's bundle, its pytest output and verify-bundle's output
# Exit status: 0 when every step completed and its bundle is conformant (in a dry run: when every
# step got as far as pytest accepting its options, at least one bundle was written, and in every
# bundle written verify-bundle found nothing but what policy-only without a GPU and the cut
# explain); 1 otherwise, with the reasons in summary.md; 2 for a bad option or a missing
# requirement, with what to do.
#
# On the GPU machine the script uses that machine's own torch (python3, or $PYTHON) and puts this
# repository on PYTHONPATH (nothing is installed from the network there). The pure-Python
# dependencies the machine lacks travel as wheels in .whl/ (git ignores it, so it must be named to
# travel with the working tree); they are installed with `pip install --no-index --no-deps --target`
# into a scratch directory. docs/vendor-results.md says how to make the call.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
REPORT="$ROOT/benchmarks/gpu_certify_report.py"
WHEEL_DIR=.whl
# The project's dependencies missing from the lent machines' image (its package list, read
# 2026-11-17): jsonschema and what it requires; the rest (torch, PyYAML, pytest, pytest-xdist,
# pytest-timeout, hypothesis, numpy, packaging, ninja, attrs, typing-extensions) are there.
WHEELS=(jsonschema jsonschema-specifications referencing rpds-py)
WHEEL_PYTHON=3.12 # the lent machines' python3

STEPS=(eager inductor export aoti)
declare -A MODE_ARGS=(
    [eager]=""
    [inductor]="--mode compile --compile-backend inductor"
    [export]="--mode export"
    [aoti]="--mode aoti"
)
# --test-timeout per step: a compiled step's first test of a batch compiles the whole batch.
declare -A TEST_TIMEOUT=([eager]=60 [inductor]=180 [export]=120 [aoti]=180)
# Shares of wall clock (s). On the GPU: SETUP + the shares + FINAL = 530 s, inside 9 minutes.
# Seen on an H200 (torch 2.11, -n 12): eager 35 s; inductor's mode checks alone 103 s to 320 s.
declare -A SHARE=([eager]=70 [inductor]=220 [export]=85 [aoti]=105)
SETUP=20     # installing the wheels, importing torch and the suite
WRAP_UP=20   # from the interrupt to the bundle written (xdist gives its workers 10 s to stop)
FINAL=25     # the last step's verify-bundle, the archives, the summary
WORKERS=12
# The dry run: policy-only on the 2 shared CPU cores of the project's machine, where one
# certification (--dtype all) took 88 to 130 s (load average 6 to 8), more than a step's share
# here: the steps are cut, which is what the dry run shows (the budgets, the cut, the bundles,
# the archives, the summary).
# One worker: a step starts sooner (each xdist worker collects the whole suite again). The
# wrap-up outlasts the 10 s xdist gives a worker that is still starting, so that a step cut
# then still writes its bundle.
declare -A DRY_SHARE=([eager]=34 [inductor]=34 [export]=34 [aoti]=34)
DRY_SETUP=10
DRY_WRAP_UP=12
DRY_FINAL=26
DRY_WORKERS=1
MIN_LIMIT=5 # a step given less than this is not started

usage() {
    cat <<EOF
usage: benchmarks/gpu_certify.sh [--dry-run] [--out DIR] [--steps LIST] [--budget STEP=S ...] [-n N]
       benchmarks/gpu_certify.sh --fetch-wheels

Certifies PyTorch's CUDA autocast (--backend cuda --dtype all) in each step, in order:
${STEPS[*]}; each step is one --certify run with its own share of wall clock.

  --dry-run         the same steps policy-only on this CPU machine (--policy-only), shares scaled
                    to end in under 3 minutes (steps are cut: see the header of this script)
  --out DIR         where the summary, the log and one archive per step go (default: \$OUT;
                    in a dry run, a new temporary directory); it must be empty or new
  --steps LIST      comma-separated subset of: ${STEPS[*]} (run in that order)
  --budget STEP=S   the step's share in seconds (repeatable); GPU defaults: $(shares SHARE)
                    (dry run: $(shares DRY_SHARE))
  -n N              xdist workers per step (default $WORKERS; dry run $DRY_WORKERS)
  --fetch-wheels    here, before the GPU call: download the wheels of ${WHEELS[*]}
                    (the versions installed in this Python, for CPython $WHEEL_PYTHON x86-64)
                    into $WHEEL_DIR/; downloads only, installs nothing
EOF
}

shares() { # $1 the table's name, then the steps (default: all)
    local -n table=$1
    shift
    local s out=""
    for s in "${@:-${STEPS[@]}}"; do out+="$s=${table[$s]} "; done
    printf '%s' "${out% }"
}

die() { # a user's error: one line, what to do, exit 2
    printf 'gpu_certify.sh: error: %s\n' "$1" >&2
    [[ ${2:-} == usage ]] && printf '  see: benchmarks/gpu_certify.sh --help\n' >&2
    exit 2
}

positive_int() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }

# -- options -------------------------------------------------------------------------------
dry=0
fetch=0
out=""
steps_arg=""
workers=""
budgets=()
while (($#)); do
    opt=$1
    case $opt in
    --out | --steps | --budget | -n)
        (($# >= 2)) || die "$opt needs a value" usage
        val=$2
        shift
        ;;
    --out=* | --steps=* | --budget=*) val=${opt#*=} opt=${opt%%=*} ;;
    esac
    case $opt in
    --dry-run) dry=1 ;;
    --fetch-wheels) fetch=1 ;;
    --out) out=$val ;;
    --steps) steps_arg=$val ;;
    --budget) budgets+=("$val") ;;
    -n) workers=$val ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die "unknown option '$opt'" usage ;;
    esac
    shift
done

fetch_wheels() {
    cd "$ROOT" || exit 2
    if [[ -d $WHEEL_DIR ]] && compgen -G "$WHEEL_DIR/*" >/dev/null; then
        die "$WHEEL_DIR/ is not empty; remove it (rm -r $WHEEL_DIR) to fetch the wheels again"
    fi
    git check-ignore -q "$WHEEL_DIR/" 2>/dev/null ||
        printf 'note: git does not ignore %s/; add /%s/ to .git/info/exclude\n' "$WHEEL_DIR" "$WHEEL_DIR"
    local name version specs=()
    for name in "${WHEELS[@]}"; do
        version=$("$PY" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name" 2>/dev/null) ||
            die "$name is not installed in $PY; install the project first (pip install -e \".[test]\")"
        specs+=("$name==$version")
    done
    local platforms=() n
    for n in 2_28 2_27 2_17; do platforms+=(--platform "manylinux_${n}_x86_64"); done
    "$PY" -m pip download --no-deps --only-binary=:all: --python-version "$WHEEL_PYTHON" --implementation cp \
        "${platforms[@]}" --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
        -d "$WHEEL_DIR" "${specs[@]}" || die "pip could not download ${specs[*]} (see above)"
    "$PY" "$REPORT" wheels "$WHEEL_DIR" || exit 2
    printf 'fetched into %s/: %s\nname %s in the call'"'"'s carry, beside the working tree\n' \
        "$WHEEL_DIR" "${specs[*]}" "$WHEEL_DIR"
}

if ((fetch)); then
    if ((dry)) || [[ -n $out$steps_arg$workers ]] || ((${#budgets[@]})); then
        die "--fetch-wheels only downloads; give it alone" usage
    fi
    fetch_wheels
    exit 0
fi

if ((dry)); then
    for s in "${STEPS[@]}"; do SHARE[$s]=${DRY_SHARE[$s]}; done
    SETUP=$DRY_SETUP WRAP_UP=$DRY_WRAP_UP FINAL=$DRY_FINAL WORKERS=$DRY_WORKERS
fi
workers=${workers:-$WORKERS}
positive_int "$workers" || die "-n $workers: give a positive number of workers" usage

selected=()
if [[ -n $steps_arg ]]; then
    IFS=, read -r -a asked <<<"$steps_arg"
    for a in "${asked[@]}"; do
        [[ -n ${SHARE[$a]+x} ]] || die "--steps: unknown step '$a'; the steps are: ${STEPS[*]}" usage
    done
    for s in "${STEPS[@]}"; do
        for a in "${asked[@]}"; do [[ $a == "$s" ]] && selected+=("$s") && break; done
    done
else
    selected=("${STEPS[@]}")
fi
for b in "${budgets[@]}"; do
    s=${b%%=*} v=${b#*=}
    [[ $b == *=* && -n ${SHARE[$s]+x} ]] || die "--budget $b: give STEP=SECONDS, STEP one of: ${STEPS[*]}" usage
    positive_int "$v" || die "--budget $b: the seconds must be a positive whole number" usage
    SHARE[$s]=$v
done

out=${out:-${OUT:-}}
if [[ -z $out ]]; then
    ((dry)) || die "no output directory: give --out DIR (on a lent GPU machine \$OUT is set)" usage
    out=$(mktemp -d -t gpu-certify-dry.XXXXXX) || die "could not make a temporary directory"
fi
if [[ -e $out && ! -d $out ]]; then die "--out $out: exists and is not a directory; give a new or empty one"; fi
if [[ -d $out ]] && compgen -G "$out/*" >/dev/null; then
    die "--out $out: not empty; give a new or empty directory (nothing there is overwritten)"
fi
mkdir -p "$out" || die "--out $out: cannot be created"
out=$(cd "$out" && pwd)
for tool in timeout tar "$PY"; do
    command -v "$tool" >/dev/null || die "$tool is not on PATH"
done

# -- the run ------------------------------------------------------------------------------
WORK=$(mktemp -d -t gpu-certify-work.XXXXXX) || die "could not make a temporary directory"
LOG="$out/gpu_certify.log"
jobs_alive=() # process groups to end if this script is stopped

say() { printf '%s\n' "$*" | tee -a "$LOG"; }

# shellcheck disable=SC2329 # the EXIT trap calls it
cleanup() {
    local g
    for g in "${jobs_alive[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'say "stopped by a signal"; exit 1' INT TERM
set -m # each background job in its own process group: a step's workers end with it

cd "$ROOT" || exit 2
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
printf '%s\n' "${selected[@]}" >"$WORK/plan"
policy=()
mode="on the GPU"
if ((dry)); then
    policy=(--policy-only)
    mode="dry run: policy-only"
fi
say "gpu_certify.sh ($mode): shares $(shares SHARE "${selected[@]}") s; -n $workers; output $out"

# Setup: the wheels, then the probe (torch build, device, the suite importable).
if compgen -G "$WHEEL_DIR/*.whl" >/dev/null; then
    if ((dry)); then
        "$PY" "$REPORT" wheels "$WHEEL_DIR" | tee -a "$LOG" || exit 2
        say "wheels: checked, not installed (they are for the GPU machine's Python $WHEEL_PYTHON)"
    else
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$WORK/site" "$WHEEL_DIR"/*.whl 2>&1 | tee -a "$LOG" ||
            die "the wheels in $WHEEL_DIR/ did not install (above); fetch them again here (--fetch-wheels)"
        export PYTHONPATH="$PYTHONPATH:$WORK/site"
        say "wheels: installed into a scratch directory"
    fi
elif ((dry == 0)); then
    say "no wheels in $WHEEL_DIR/ (benchmarks/gpu_certify.sh --fetch-wheels makes them)"
fi
probe_args=()
((dry)) && probe_args=(--dry-run)
timeout 120 "$PY" "$REPORT" probe "${probe_args[@]}" "$WORK/probe.json" 2>&1 | tee -a "$LOG"
probe_rc=${PIPESTATUS[0]}
if ((probe_rc == 2)); then exit 2; fi # the probe said why
((probe_rc == 0)) || die "the probe failed (exit $probe_rc, above)"

summary() { "$PY" "$REPORT" summary "$WORK" "$out" "$@"; }

archive() { # the step's directory as one file of the output
    tar -czf "$out/$1.tar.gz" -C "$WORK/steps" "$1" 2>>"$LOG" || say "$1: the archive could not be written"
}

verify_pids=()
final_deadline=$SETUP
for s in "${selected[@]}"; do final_deadline=$((final_deadline + SHARE[$s])); done
final_deadline=$((final_deadline + FINAL))

run_step() { # $1 step, $2 its deadline (seconds since the start)
    local step=$1 deadline=$2 dir="$WORK/steps/$1"
    local limit=$((deadline - SECONDS - WRAP_UP))
    mkdir -p "$dir"
    local cmd=("$PY" -m pytest -p no:autocast_conformance -p conformance.plugin --pyargs conformance
        --backend cuda "${policy[@]}" --dtype all)
    # shellcheck disable=SC2206 # the mode's options are words
    cmd+=(${MODE_ARGS[$step]})
    [[ $step != eager ]] && cmd+=(--compile-cache "$WORK/compile-cache")
    cmd+=(-n "$workers" -p no:cacheprovider -q --certify "$dir/bundle" --test-timeout "${TEST_TIMEOUT[$step]}")
    {
        echo "step=$step"
        echo "share=${SHARE[$step]}"
        echo "deadline=$deadline"
        echo "limit=$limit"
        echo "wrap_up=$WRAP_UP"
        echo "test_timeout=${TEST_TIMEOUT[$step]}"
        echo "command=${cmd[*]}"
    } >"$dir/record"
    if ((limit < MIN_LIMIT)); then
        echo "rc=not-run" >>"$dir/record"
        say "== $step: not run: ${limit} s left of its share, under the $MIN_LIMIT s a run needs"
        return
    fi
    say "== $step: up to $limit s (its share ends at $deadline s of the run; now $SECONDS s)"
    local started ended rc job
    started=$(date +%s.%N)
    timeout --foreground -s INT -k "$WRAP_UP" "$limit" "${cmd[@]}" >"$dir/certify.log" 2>&1 &
    job=$!
    jobs_alive+=("$job")
    wait "$job"
    rc=$?
    kill -KILL -- "-$job" 2>/dev/null # what the run left behind (a worker stuck in a kernel)
    ended=$(date +%s.%N)
    printf 'rc=%s\nstarted=%s\nended=%s\nended_at=%s\n' "$rc" "$started" "$ended" "$SECONDS" >>"$dir/record"
    tail -n 3 "$dir/certify.log" | sed "s/^/   $step | /" | tee -a "$LOG"
    archive "$step"
    if [[ -f $dir/bundle/manifest.json ]]; then
        local cap=$((final_deadline - SECONDS))
        ((cap > 0)) || cap=1 # (timeout 0 would mean no limit)
        (
            timeout -k 5 "$cap" "$PY" -m conformance.cli verify-bundle "$dir/bundle" >"$dir/verify.log" 2>&1
            echo $? >"$dir/verify.rc"
        ) &
        verify_pids+=($!)
        jobs_alive+=($!)
    fi
}

deadline=$SETUP
for s in "${selected[@]}"; do
    deadline=$((deadline + SHARE[$s]))
    run_step "$s" "$deadline"
    summary >/dev/null || say "the summary could not be written (above)"
done
for p in "${verify_pids[@]}"; do wait "$p"; done
for s in "${selected[@]}"; do [[ -d $WORK/steps/$s ]] && archive "$s"; done
say "== done in $SECONDS s"
final=(--final)
((dry)) && final+=(--dry-run)
summary "${final[@]}" | tee -a "$LOG"
exit "${PIPESTATUS[0]}"
