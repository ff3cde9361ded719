# results/lib.sh — what every results/regenerate-*.sh shares: where the pmds program is, the
# environment record, one `pmds bench` invocation per run, and the plots. Sourced, not run.
#   results_begin DIR SETTINGS...   empties results/DIR, records the machine and settings
#   run NAME ARGS...                pmds bench ARGS -> DIR/json/NAME.json, DIR/csv/NAME.csv,
#                                   its table appended to DIR/tables.txt
#   plot SUBDIR FILES...            scripts/plot.py FILES -> DIR/plots/SUBDIR/*.png
#   family S T...                   prints S/T1,S/T2,... (a --structure list)
#   results_end                     records the load at the end
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pmds=${PMDS_BIN:-build/release/bin/pmds}
[[ -x $pmds ]] || { echo "$0: $pmds is not built (cmake --preset release && cmake --build --preset release --target pmds_cli)" >&2; exit 1; }

results_begin() {
  out=results/$1
  shift
  rm -rf "$out"
  mkdir -p "$out/json" "$out/csv" "$out/plots"
  {
    echo "date:    $(date -Is)"
    echo "commit:  $(git rev-parse --short HEAD)"
    echo "machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "memory:  $(free -g | awk '/Mem:/ {print $2 " GiB"}')"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"
    echo "settings: $*"
  } >"$out/environment.txt"
}

run() {
  local name=$1
  shift
  echo "== $name: ${PMDS_EADR:+PMDS_EADR=$PMDS_EADR }${PMDS_FLUSH:+PMDS_FLUSH=$PMDS_FLUSH }pmds bench $*" \
    | tee -a "$out/tables.txt" >&2
  "$pmds" bench "$@" --json "$out/json/$name.json" --csv "$out/csv/$name.csv" \
    | tee -a "$out/tables.txt"
  echo >>"$out/tables.txt"
}

plot() {
  local dir=$1
  shift
  /usr/bin/python3 scripts/plot.py --out "$out/plots/$dir" "$@" >/dev/null
}

family() {
  local s=$1 t
  shift
  local names=()
  for t in "$@"; do names+=("$s/$t"); done
  (IFS=,; echo "${names[*]}")
}

results_end() {
  echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min), $(date -Is)" >>"$out/environment.txt"
}
