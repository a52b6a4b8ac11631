#!/usr/bin/env bash
# The folders are layers, lowest first: cuda and dist (the GPU, the other processes) -> tensor -> autograd -> nn -> io -> lm -> analysis ->
# cli -> tools (lm/ trains and evaluates; analysis/ holds the bottleneck instruments built on it;
# cli/ the mosgrad program, its flag tables and the reproduce harness that runs its commands). A
# file may include headers of its own folder and of the folders below it, never above: tensor/ can
# then be read and tested without autograd/, autograd/ without nn/, and so on. tests/ and bench/ sit on top
# and may include anything. `make test` runs this first (also `make check-layers`); it prints every
# include that breaks the order, with its file and line, and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

# In layer order; tests/ and bench/ share the top.
FOLDERS=(cuda dist tensor autograd nn io lm analysis cli tools tests bench)
declare -A rank=([cuda]=0 [dist]=0 [tensor]=1 [autograd]=2 [nn]=3 [io]=4 [lm]=5 [analysis]=6 [cli]=7 [tools]=8
                 [tests]=9 [bench]=9)

checked=0 bad=0
while IFS= read -r hit; do
  file=${hit%%:*} rest=${hit#*:}
  line=${rest%%:*} text=${rest#*:}
  [[ $text =~ \"([^\"]+)\" ]] || continue
  target=${BASH_REMATCH[1]}
  from=${file%%/*}
  to=$from
  [[ $target == */* ]] && to=${target%%/*}  # "x.h" without a folder is the file's own folder
  checked=$((checked + 1))
  if [[ -z ${rank[$to]+set} ]]; then
    echo "$file:$line: #include \"$target\": $to/ is not a layer;" \
         "give it a rank in tools/check_layers.sh"
    bad=$((bad + 1))
  elif ((rank[$to] > rank[$from])); then
    echo "$file:$line: #include \"$target\": $from/ may not include $to/, a higher layer" \
         "(cuda, dist -> tensor -> autograd -> nn -> io -> lm -> analysis -> cli -> tools)"
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
echo "check_layers: ok, $checked includes follow cuda, dist -> tensor -> autograd -> nn -> io -> lm -> analysis -> cli -> tools"
