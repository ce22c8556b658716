#!/usr/bin/env bash
# The cake tool end to end: every example spec validates, plans and explains;
# bad input exits 2 with the field named; plans round-trip through files.
set -u
root=$1
cake=${CAKE:?set CAKE to the cake binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
pass=0

expect() {  # expect NAME WANT_EXIT GREP_PATTERN -- COMMAND...
  local name=$1 want=$2 pattern=$3
  shift 4
  "$@" >"$tmp/out" 2>&1
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL $name: exit $got, want $want"; sed 's/^/    /' "$tmp/out"; failures=$((failures + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -qE -- "$pattern" "$tmp/out"; then
    echo "FAIL $name: output lacks /$pattern/"; sed 's/^/    /' "$tmp/out"; failures=$((failures + 1)); return
  fi
  pass=$((pass + 1))
}

for spec in "$root"/examples/specs/*.textproto; do
  n=$(basename "$spec" .textproto)
  expect "validate $n" 0 ": valid: " -- "$cake" validate "$spec"
  expect "plan $n" 0 "^fingerprint: \"[0-9a-f]{32}\"" -- "$cake" plan "$spec"
  expect "explain $n" 0 "^launches \([0-9]+\):" -- "$cake" explain "$spec"
  expect "plan --out $n" 0 "^wrote " -- "$cake" plan "$spec" --out "$tmp/$n.binpb"
  expect "explain saved $n" 0 "^plan [0-9a-f]{32}" -- "$cake" explain "$tmp/$n.binpb"
done

printf 'op: RMSNORM\nlayout { tokens: 8 dim: 300 }\nphases: [FORWARD]\n' >"$tmp/bad.textproto"
expect "bad dim" 2 "layout\.dim = 300" -- "$cake" validate "$tmp/bad.textproto"
expect "bad dim plan" 2 "layout\.dim = 300" -- "$cake" plan "$tmp/bad.textproto"
printf 'op: RMSNORM\nlayout { tokens: 8 dimm: 64 }\n' >"$tmp/typo.textproto"
expect "parse error" 2 "typo\.textproto:2:" -- "$cake" validate "$tmp/typo.textproto"
expect "missing file" 2 "cannot open" -- "$cake" validate "$tmp/none.textproto"
expect "unknown arch" 2 "arch = \"sm_42\"" -- "$cake" plan "$root/examples/specs/qknorm_k_contiguous_t4096.textproto" --arch sm_42
expect "plan for other arch" 2 "plan arch = \"sm_90a\": the target device is sm_100a" -- \
  "$cake" explain "$tmp/qknorm_k_contiguous_t4096.binpb" --arch sm_100a
expect "text plan" 0 "^wrote " -- "$cake" plan "$root/examples/specs/qknorm_k_contiguous_t4096.textproto" --out "$tmp/p.textproto"
expect "explain text plan" 0 "rmsnorm.bwd.det.partials" -- "$cake" explain "$tmp/p.textproto"
expect "explain recompute order" 0 "RECOMPUTE .* rows from the last" -- \
  "$cake" explain "$root/examples/specs/ckpt_rmsnorm_t65536_h4096.textproto"
# A persistent backward whose CTAs would fit an SM once more than its grid
# counts on asks for more shared memory, and explain says so (H = 2304: four
# 160-thread CTAs a SM); at H = 4096 nothing is padded.
printf 'op: RMSNORM\nlayout { tokens: 16384 dim: 2304 }\nphases: [BACKWARD]\n' >"$tmp/h2304.textproto"
expect "explain padded smem" 0 "det\.partials .* smem 45686 \(padded from 39936: at most 4 CTAs a SM\)" -- \
  "$cake" explain "$tmp/h2304.textproto"
"$cake" explain "$root/examples/specs/ckpt_rmsnorm_t65536_h4096.textproto" >"$tmp/h4096.txt" 2>&1
if grep -q "padded from" "$tmp/h4096.txt"; then
  echo "FAIL explain unpadded smem: says padded"; failures=$((failures + 1))
else
  pass=$((pass + 1))
fi
expect "bad extension" 2 "expected a \.binpb" -- "$cake" plan "$root/examples/specs/qknorm_k_contiguous_t4096.textproto" --out "$tmp/p.json"
expect "programs" 0 "rmsnorm\.bwd\.det\.partials" -- "$cake" programs
expect "routes" 0 "evidence: " -- "$cake" routes --arch sm_90a
expect "unknown command" 2 "unknown command" -- "$cake" frobnicate
expect "unknown flag" 2 "unknown flag --bogus" -- "$cake" programs --bogus 1
expect "missing argument" 2 "expected 1 argument" -- "$cake" validate
expect "help" 0 "usage: cake plan SPEC" -- "$cake" plan --help
expect "top help" 0 "commands:" -- "$cake" --help

expect "graph dot" 0 "^wrote .*graph\.dot" -- "$cake" graph "$root/examples/specs/ckpt_gate_t8192_h32_d128.textproto" --dot "$tmp/graph.dot"
if grep -q "rmsnorm_silu_gate.bwd.kb" "$tmp/graph.dot" && grep -q -- "-> n3" "$tmp/graph.dot"; then
  pass=$((pass + 1))
else
  echo "FAIL graph dot content"; failures=$((failures + 1))
fi
expect "graph needs --dot" 2 "--dot FILE: required" -- "$cake" graph "$root/examples/specs/ckpt_gate_t8192_h32_d128.textproto"

# cake run: on a machine without a GPU it prints the plan, says so, exits 3;
# with one it checks the outputs (exit 0 when within budget).
"$cake" run "$root/examples/specs/qknorm_k_contiguous_t4096.textproto" >"$tmp/run.out" 2>&1
rc=$?
if { [ $rc -eq 3 ] && grep -q "no CUDA device; the plan above was not run" "$tmp/run.out" && grep -q "^launches" "$tmp/run.out"; } ||
   { [ $rc -eq 0 ] && grep -qE "^  dw +[0-9.]+  ok" "$tmp/run.out"; }; then
  pass=$((pass + 1))
else
  echo "FAIL run: exit $rc"; sed 's/^/    /' "$tmp/run.out"; failures=$((failures + 1))
fi
expect "run bad replays" 2 "--replays: must be >= 1" -- "$cake" run "$root/examples/specs/qknorm_k_contiguous_t4096.textproto" --replays 0

# cake bench: the case list needs no GPU; bad flags exit 2 naming the flag.
expect "bench cases" 0 "^wrote 235 case\(s\)" -- "$cake" bench --cases-out "$tmp/cases.json"
if [ "$(grep -c '"shape":' "$tmp/cases.json")" -eq 235 ] && grep -q '"op": "ckpt.cast"' "$tmp/cases.json"; then
  pass=$((pass + 1))
else
  echo "FAIL bench cases content"; failures=$((failures + 1))
fi
expect "bench filter and ops" 0 "^wrote 10 case\(s\)" -- "$cake" bench --filter "gate" --ops fwd,bwd --cases-out "$tmp/c.json"
expect "bench alternatives" 0 "^wrote 2 case\(s\)" -- "$cake" bench --filter "[4096, 4096] bf16w|gate 260" --ops fwd --cases-out "$tmp/c.json"
expect "bench parts" 0 "^wrote 118 case\(s\)" -- "$cake" bench --part 2/2 --cases-out "$tmp/c.json"
expect "bench program" 0 "^wrote 6 case\(s\)" -- "$cake" bench --program rmsnorm.fwd.warp --ops fwd --cases-out "$tmp/c.json"
expect "bench program in ckpt" 0 "^wrote 18 case\\(s\\)" -- "$cake" bench --program rmsnorm.fwd.warp --cases-out "$tmp/c.json"
# kb runs where the routed backward writes partials too (the planner adds its
# accumulator and dw.finish); in the deterministic mode it takes no case, and a
# reduce program is refused.
expect "bench program, dw form" 0 "^wrote 3 case\\(s\\)" -- "$cake" bench --program rmsnorm.bwd.kb --mode nondet --ops bwd --filter "[16384, 1536] bf16w|[65536, 6144] bf16w|[65536, 1536] bf16w" --cases-out "$tmp/c.json"
expect "bench program, det" 2 "no case to run" -- "$cake" bench --program rmsnorm.bwd.kb --ops bwd --filter "[16384, 1536] bf16w" --cases-out "$tmp/c.json"
expect "bench program, reduce" 2 "a reduce program" -- "$cake" bench --program dw.reduce --ops bwd --cases-out "$tmp/c.json"
# A list of programs: each case once per entry that takes it; `all` is the
# routed programs and every forward and backward (kb only in the
# non-deterministic mode).
expect "bench program all" 0 "^wrote 4 case\\(s\\)" -- "$cake" bench --program all --ops bwd --filter "[16384, 1536] bf16w" --cases-out "$tmp/c.json"
grep -q '"op": "bwd @rmsnorm.bwd.det.lockstep"' "$tmp/c.json" && pass=$((pass + 1)) || { echo "FAIL bench program all: no det.lockstep row"; failures=$((failures + 1)); }
expect "bench program all, nondet" 0 "^wrote 5 case\\(s\\)" -- "$cake" bench --program all --mode nondet --ops bwd --filter "[16384, 1536] bf16w" --cases-out "$tmp/c.json"
expect "bench program list" 0 "^wrote 2 case\\(s\\)" -- "$cake" bench --program routed,rmsnorm.bwd.split --ops bwd --filter "[16384, 1536] bf16w" --cases-out "$tmp/c.json"
# recompute:ID: a forward program in the recompute alone, on the checkpointed
# ops only: fwd, ckpt and ckpt.cast routed, the two checkpointed ones forced.
expect "bench program recompute" 0 "^wrote 5 case\\(s\\)" -- "$cake" bench --program routed,recompute:rmsnorm.fwd.flat.dense --filter "[4096, 2048] bf16w" --ops fwd,ckpt,ckpt.cast --cases-out "$tmp/c.json"
grep -q '"op": "ckpt @recompute:rmsnorm.fwd.flat.dense"' "$tmp/c.json" && pass=$((pass + 1)) || { echo "FAIL bench program recompute: no recompute row"; failures=$((failures + 1)); }
expect "bench program recompute, backward" 2 "pick a forward for the recompute" -- "$cake" bench --program recompute:rmsnorm.bwd.split
expect "bench program twice" 2 "\"rmsnorm.bwd.split\" named twice" -- "$cake" bench --program all,rmsnorm.bwd.split
expect "bench program list, bad entry" 2 "--program \"nope\": no such program" -- "$cake" bench --program rmsnorm.bwd.split,nope
expect "bench spec file" 0 "^wrote 4 case\(s\)" -- "$cake" bench "$root/examples/specs/residual_rmsnorm_t16384_h6144.textproto" --cases-out "$tmp/c.json"
expect "bench bad part" 2 "--part \"3/2\": expected K/N" -- "$cake" bench --part 3/2
expect "bench bad op" 2 "--ops: \"nope\"" -- "$cake" bench --ops fwd,nope
expect "bench bad program" 2 "--program \"nope\": no such program" -- "$cake" bench --program nope
expect "bench bad mode" 2 "--mode \"fast\"" -- "$cake" bench --mode fast
expect "bench bad flush" 2 "--flush \"x\": expected memset or kernel" -- "$cake" bench --flush x
expect "bench json dir" 2 "--json .*: no directory" -- "$cake" bench --json "$tmp/none/b.json"
expect "bench bad rounds" 2 "--rounds: expected an integer >= 1" -- "$cake" bench --rounds 0
expect "bench nothing selected" 2 "no case to run" -- "$cake" bench --filter "no such shape"
expect "bench bad spec" 2 "layout\.dim = 300" -- "$cake" bench "$tmp/bad.textproto"
"$cake" bench --filter "gate 260" --ops fwd --rounds 1 --replays 1 --json "$tmp/b.json" >"$tmp/bench.out" 2>&1
rc=$?
if { [ $rc -eq 3 ] && grep -q "no CUDA device; 1 case(s) not run" "$tmp/bench.out" && [ ! -e "$tmp/b.json" ]; } ||
   { [ $rc -eq 0 ] && grep -q "^wrote " "$tmp/bench.out"; }; then
  pass=$((pass + 1))
else
  echo "FAIL bench run: exit $rc"; sed 's/^/    /' "$tmp/bench.out"; failures=$((failures + 1))
fi

echo "cake cli: $pass passed, $failures failed"
[ "$failures" -eq 0 ]
