"""The straightforward way: OpenCV decodes, letterboxes; onnxruntime runs CenterNet; rows go to a CSV.

What a competent user writes to detect objects in every frame of a clip, for `npm run bench -- peer`.
Prints one JSON line: {"frames", "seconds", "fps", "detections", "cpuSeconds"} (CPU time of every
thread of the process while it worked).
"""
import csv
import json
import sys
import time

import cv2
import numpy as np
import onnxruntime as ort

SIZE = 512
MIN_SCORE = 0.35
IOU = 0.5


def letterbox(frame):
    h, w = frame.shape[:2]
    scale = min(SIZE / w, SIZE / h)
    nw, nh = round(w * scale), round(h * scale)
    resized = cv2.resize(frame, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
    top, left = (SIZE - nh) // 2, (SIZE - nw) // 2
    padded = cv2.copyMakeBorder(resized, top, SIZE - nh - top, left, SIZE - nw - left, cv2.BORDER_CONSTANT, value=0)
    rgb = cv2.cvtColor(padded, cv2.COLOR_BGR2RGB)
    return rgb.astype(np.float32)[None], scale, left, top


def main(clip, model, out_csv):
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    video = cv2.VideoCapture(clip)
    frames = detections = 0
    started = time.perf_counter()
    cpu_started = time.process_time()
    with open(out_csv, "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["frame", "class", "score", "x1", "y1", "x2", "y2"])
        while True:
            ok, frame = video.read()
            if not ok:
                break
            tensor, scale, left, top = letterbox(frame)
            found = session.run(None, {input_name: tensor})[0][0]
            found = found[found[:, 4] >= MIN_SCORE]
            boxes = [[x1, y1, x2 - x1, y2 - y1] for x1, y1, x2, y2 in found[:, :4].tolist()]
            for i in np.array(cv2.dnn.NMSBoxes(boxes, found[:, 4].tolist(), MIN_SCORE, IOU)).flatten():
                x1, y1, x2, y2, score, cls = found[i].tolist()
                rows.writerow([frames, int(cls), round(score, 3), (x1 - left) / scale, (y1 - top) / scale, (x2 - left) / scale, (y2 - top) / scale])
                detections += 1
            frames += 1
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    print(json.dumps({"frames": frames, "seconds": round(seconds, 3), "fps": round(frames / seconds, 2), "detections": detections, "cpuSeconds": round(cpu_seconds, 3)}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
