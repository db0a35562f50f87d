# Shared by the reports' run.sh scripts (sourced after their log function).

# The committed runs trained and sampled in bf16 ('auto' on a CPU with AMX or AVX-512 bf16). On a CPU
# without, 'auto' gives fp32 under the same checkpoint names: another precision, not another seed, and
# several times slower (docs/results.md). A training step refuses there unless ALLOW_FP32=1; the report runs anywhere.
require_fast_bf16() {
  grep -qwE 'amx_bf16|avx512_bf16' /proc/cpuinfo 2>/dev/null && return
  [[ ${ALLOW_FP32:-0} == 1 ]] && { log "warning: no AMX/AVX-512 bf16 here: this run trains in fp32 (ALLOW_FP32=1)"; return; }
  echo "this CPU has no AMX/AVX-512 bf16: step '$1' would train in fp32, unlike the committed bf16 runs," \
    "and take several times longer; run it on a machine with bf16, or set ALLOW_FP32=1 to run it anyway" >&2
  exit 3
}
