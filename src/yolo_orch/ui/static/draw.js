// Drawing an inference result over its image: boxes, rotated boxes, masks (polygons or COCO
// RLE), keypoints and classes, scaled from the image's pixels to the canvas.

const COLOURS = ['#e11d48', '#2563eb', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d'];

export function colourOf(classId) {
  return COLOURS[Math.abs(classId ?? 0) % COLOURS.length];
}

// `image`: an HTMLImageElement, or null to draw on a plain background of the image's size.
export function drawEntry(canvas, image, entry, maxSide) {
  const width = entry.width || image?.naturalWidth || 640;
  const height = entry.height || image?.naturalHeight || 480;
  const scale = Math.min(1, maxSide / Math.max(width, height));
  canvas.width = Math.round(width * scale);
  canvas.height = Math.round(height * scale);
  const ctx = canvas.getContext('2d');
  if (image) {
    ctx.drawImage(image, 0, 0, canvas.width, canvas.height);
  } else {
    ctx.fillStyle = '#64748b';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
  }
  const line = Math.max(1.5, 2 * scale * (maxSide > 400 ? 1.5 : 1));
  ctx.lineWidth = line;
  ctx.font = `${Math.max(10, Math.round(14 * Math.max(scale, 0.6)))}px system-ui, sans-serif`;
  for (const detection of entry.detections ?? []) {
    const colour = colourOf(detection.class_id);
    ctx.strokeStyle = colour;
    ctx.fillStyle = colour;
    if (detection.mask) drawMask(ctx, detection.mask, colour, scale);
    let anchor = null;
    if (detection.box) {
      const { x1, y1, x2, y2 } = detection.box;
      ctx.strokeRect(x1 * scale, y1 * scale, (x2 - x1) * scale, (y2 - y1) * scale);
      anchor = [x1 * scale, y1 * scale];
    }
    if (detection.obb) {
      polygon(ctx, detection.obb.points, scale);
      ctx.stroke();
      anchor = [detection.obb.points[0][0] * scale, detection.obb.points[0][1] * scale];
    }
    for (const [x, y, confidence] of detection.keypoints ?? []) {
      if (confidence !== null && confidence < 0.5) continue;
      ctx.beginPath();
      ctx.arc(x * scale, y * scale, Math.max(2, 3 * scale), 0, 2 * Math.PI);
      ctx.fill();
    }
    if (anchor) label(ctx, `${detection.class_name} ${percent(detection.confidence)}`, anchor, colour);
  }
  const classes = entry.classes ?? [];
  if (classes.length) {
    const top = classes[0];
    const share = top.confidence ?? top.pixel_ratio;
    label(ctx, `${top.class_name} ${percent(share)}`, [4, 4 + 16], '#111827');
  }
}

// A share as a percentage that never reads 0% for a share above 0 (a confidence of 0.006 is
// 0.6%, not 0%), nor 100% below 1.
export function percent(share) {
  const value = share * 100;
  if (value > 0 && value < 0.1) return '<0.1%';
  if (value > 99 && value < 100) return `${Math.min(99.9, value).toFixed(1)}%`;
  return value < 10 && value > 0 ? `${value.toFixed(1)}%` : `${value.toFixed(0)}%`;
}

function label(ctx, text, [x, y], colour) {
  const metrics = ctx.measureText(text);
  const height = parseInt(ctx.font, 10) + 4;
  const top = Math.max(0, y - height);
  ctx.fillStyle = colour;
  ctx.fillRect(x, top, metrics.width + 6, height);
  ctx.fillStyle = '#ffffff';
  ctx.fillText(text, x + 3, top + height - 5);
}

function polygon(ctx, points, scale) {
  ctx.beginPath();
  points.forEach(([x, y], i) => (i ? ctx.lineTo(x * scale, y * scale) : ctx.moveTo(x * scale, y * scale)));
  ctx.closePath();
}

function drawMask(ctx, mask, colour, scale) {
  ctx.save();
  ctx.globalAlpha = 0.35;
  if (mask.polygons) {
    for (const ring of mask.polygons) {
      polygon(ctx, ring, scale);
      ctx.fill();
    }
  } else if (mask.rle) {
    const [height, width] = mask.rle.size;
    const pixels = decodeRle(mask.rle.counts, width * height);
    const layer = new OffscreenCanvas(width, height);
    const layerCtx = layer.getContext('2d');
    const data = layerCtx.createImageData(width, height);
    const [r, g, b] = [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16));
    for (let i = 0; i < pixels.length; i += 1) {
      if (!pixels[i]) continue;
      // RLE runs down the columns; ImageData goes along the rows.
      const row = i % height;
      const column = Math.floor(i / height);
      const at = (row * width + column) * 4;
      data.data.set([r, g, b, 255], at);
    }
    layerCtx.putImageData(data, 0, 0);
    ctx.drawImage(layer, 0, 0, width * scale, height * scale);
  }
  ctx.restore();
}

// COCO's compressed RLE string (pycocotools `rleToString`) to one 0/1 byte per pixel.
export function decodeRle(counts, total) {
  const runs = [];
  let p = 0;
  while (p < counts.length) {
    let value = 0;
    let shift = 0;
    let more = true;
    while (more) {
      const c = counts.charCodeAt(p) - 48;
      p += 1;
      value |= (c & 0x1f) << (5 * shift);
      more = (c & 0x20) !== 0;
      shift += 1;
      if (!more && (c & 0x10)) value |= -1 << (5 * shift);
    }
    if (runs.length > 2) value += runs[runs.length - 2];
    runs.push(value);
  }
  const pixels = new Uint8Array(total);
  let at = 0;
  runs.forEach((run, i) => {
    if (i % 2) pixels.fill(1, at, Math.min(total, at + run));
    at += run;
  });
  return pixels;
}
