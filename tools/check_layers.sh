#!/usr/bin/env bash
# The folders are layers, lowest first: math (the scalar formulas both devices compile) -> cuda and
# mpi (the GPU backend's entry points, the processes of an MPI run) -> tensor -> autograd -> nn ->
# io -> lm -> analysis -> reproduce -> cli -> tools (lm/ trains and evaluates; analysis/ holds the
# bottleneck instruments built on it; reproduce/ the harness that runs whole plans of them; cli/
# the mosgrad program and its flag tables). A
# file may include headers of its own folder and of the folders below it, never above: tensor/ can
# then be read and tested without autograd/, autograd/ without nn/, and so on. tests/ and bench/ sit on top
# and may include anything. `make test` runs this first (also `make check-layers`); it prints every
# include that breaks the order, with its file and line, and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

# In layer order; tests/ and bench/ share the top.
FOLDERS=(math cuda mpi tensor autograd nn io lm analysis reproduce cli tools tests bench)
declare -A rank=([math]=0 [cuda]=1 [mpi]=1 [tensor]=2 [autograd]=3 [nn]=4 [io]=5 [lm]=6 [analysis]=7
                 [reproduce]=8 [cli]=9 [tools]=10 [tests]=11 [bench]=11)

checked=0 bad=0 edges=""
while IFS= read -r hit; do
  file=${hit%%:*} rest=${hit#*:}
  line=${rest%%:*} text=${rest#*:}
  [[ $text =~ \"([^\"]+)\" ]] || continue
  target=${BASH_REMATCH[1]}
  from=${file%%/*}
  to=$from
  [[ $target == */* ]] && to=${target%%/*}  # "x.h" without a folder is the file's own folder
  checked=$((checked + 1))
  # The edge between two files' modules (a header and its source are one module), within a folder.
  module=${file%.*} target_module=${target%.*}
  [[ $target == */* ]] || target_module=$from/$target_module
  [[ $to == "$from" && $module != "$target_module" ]] && edges+="$module $target_module"$'\n'
  if [[ -z ${rank[$to]+set} ]]; then
    echo "$file:$line: #include \"$target\": $to/ is not a layer;" \
         "give it a rank in tools/check_layers.sh"
    bad=$((bad + 1))
  elif ((rank[$to] > rank[$from])); then
    echo "$file:$line: #include \"$target\": $from/ may not include $to/, a higher layer" \
         "(math -> cuda, mpi -> tensor -> autograd -> nn -> io -> lm -> analysis -> reproduce -> cli -> tools)"
    bad=$((bad + 1))
  fi
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' \
           --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.cu' --include='*.cuh' \
           "${FOLDERS[@]}" || true)

if ((checked == 0)); then  # grep found nothing: a broken check must not pass
  echo "check_layers: no #include found under ${FOLDERS[*]}"
  exit 1
fi
if ((bad > 0)); then
  echo "check_layers: $bad forbidden include(s) of $checked"
  exit 1
fi
# Inside a folder too, the files form layers: no loop of modules that include each other (a.cpp
# includes b.h and b.cpp includes a.h), so that each can be read and tested before the other.
for folder in "${FOLDERS[@]}"; do
  [[ $folder == tests || $folder == bench || $folder == tools ]] && continue
  loop=$(grep "^$folder/" <<<"$edges" | tsort 2>&1 >/dev/null || true)
  if [[ -n $loop ]]; then
    echo "check_layers: these modules of $folder/ include each other in a loop; move what both need"
    echo "into one of them or into a module below both:"
    echo "$loop" | grep -v 'input contains a loop' | sed 's/^tsort: /  /' | sort -u
    exit 1
  fi
done
echo "check_layers: ok, no loop inside a folder; $checked includes follow math -> cuda, mpi -> tensor -> autograd -> nn -> io -> lm -> analysis -> reproduce -> cli -> tools"
