#!/bin/bash
# The whole strata-demo recipe on the GPU machine, in one call (see docs/DEMO_MODEL.md):
#   tokenizer (trained here unless .carry/train_demo/tokenizer/ already holds one), corpus
#   encoding, both models trained side by side on the one GPU, goldens on the CPU, then one
#   archive of tokenizer/, models/, goldens/ and logs/ in 15 MB pieces
#   ($OUT/train_demo.tar.gz.00, .01, ...: the device tool returns files of at most 16 MiB).
#   Join them with: cat train_demo.tar.gz.* | tar xz
# Usage (repository root): bash tools/train_demo/run_device.sh [smoke|full]
# Needs .carry/train_demo/corpus.jsonl.xz from build_corpus.py (carried with the call).
MODE=${1:-full}
case "$MODE" in
  smoke) DEMO_S=40; DRAFT_S=40 ;;
  full) DEMO_S=${DEMO_SECONDS:-360}; DRAFT_S=${DRAFT_SECONDS:-180} ;;
  *) echo "usage: $0 [smoke|full]"; exit 2 ;;
esac
D=tools/train_demo
C=.carry/train_demo
W=/tmp/train_demo
OUT=${OUT:-/tmp/train_demo_out}
rm -rf "$W" && mkdir -p "$W/logs" "$W/models" "$W/goldens" "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*"; }

{
  nvidia-smi -L
  python3 -c "import torch, transformers, tokenizers, jinja2; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__, 'jinja2', jinja2.__version__)"
  python3 -c "import transformers.utils as u; print('flash-linear-attention available:', u.is_flash_linear_attention_available())" 2>&1
} 2>&1 | tee "$W/logs/env.txt"

if [ -f "$C/tokenizer/tokenizer.json" ]; then
  cp -r "$C/tokenizer" "$W/tokenizer" && stamp "tokenizer: carried"
else
  python3 $D/make_tokenizer.py train "$C/corpus.jsonl.xz" "$W/tokenizer" 2>&1 | tee "$W/logs/tokenizer.txt"
  stamp "tokenizer: trained"
fi
python3 $D/make_tokenizer.py encode "$C/corpus.jsonl.xz" "$W/tokenizer" "$W/data.npz" 2>&1 | tee -a "$W/logs/tokenizer.txt"
stamp "corpus encoded"

python3 $D/train.py strata-demo "$W/data.npz" "$W/tokenizer" "$W/models/strata-demo" --seconds "$DEMO_S" \
  --lr 2e-3 --batch-tokens 98304 --profile > "$W/logs/train-strata-demo.txt" 2>&1 &
demo=$!
python3 $D/train.py strata-demo-draft "$W/data.npz" "$W/tokenizer" "$W/models/strata-demo-draft" --seconds "$DRAFT_S" \
  --lr 3e-3 > "$W/logs/train-strata-demo-draft.txt" 2>&1 &
draft=$!
wait $demo; echo "strata-demo exit $?"; wait $draft; echo "strata-demo-draft exit $?"
stamp "training done"
grep -hE "parameters;|done:|Error" "$W"/logs/train-*.txt | cut -c1-300
grep -A 22 "profile of" "$W/logs/train-strata-demo.txt" | cut -c1-160

for m in strata-demo strata-demo-draft; do
  GOLDEN_THREADS=7 python3 $D/make_goldens.py "$W/models/$m" "$W/goldens/$m.json" > "$W/logs/goldens-$m.txt" 2>&1 &
done
wait
stamp "goldens done"
grep -hE "^\[strata|reply:" "$W"/logs/goldens-*.txt | cut -c1-220
rm -f "$W/data.npz"
tar czf - -C "$W" . | split -b 15000000 -d - "$OUT/train_demo.tar.gz."
stamp "archive: $(du -ch "$OUT"/train_demo.tar.gz.* | tail -n 1)"
