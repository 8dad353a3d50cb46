// ONNX Runtime's side of bench/compare_ort.sh: one session (CPU, sequential, graph
// optimisations all, intra-op threads as asked), a warm-up run whose output is written for the
// cross-check, then timed runs. The time of a run is ORT's own: its profiler's "model_run"
// event, the native session run without the Node.js call around it (the wall time of the call is
// printed beside it). Prints one JSON line.
//   node run_ort.js MODEL.onnx OUT.bin RUNS THREADS NAME=FILE.bin:D0xD1x... ...
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main() {
  const [model, outPath, runsArg, threadsArg, ...inputSpecs] = process.argv.slice(2);
  const runs = Number(runsArg), threads = Number(threadsArg);
  if (!model || !outPath || !(runs >= 1) || !(threads >= 1) || inputSpecs.length === 0) {
    console.error('usage: node run_ort.js MODEL.onnx OUT.bin RUNS THREADS NAME=FILE.bin:D0xD1x...');
    process.exit(2);
  }
  const feeds = {};
  for (const spec of inputSpecs) {
    const m = /^([^=]+)=(.+):([0-9x]+)$/.exec(spec);
    if (!m) throw new Error(`bad input ${spec}`);
    const buf = fs.readFileSync(m[2]);
    const data = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    feeds[m[1]] = new ort.Tensor('float32', data, m[3].split('x').map(Number));
  }
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-'));
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    enableProfiling: true,
    profileFilePrefix: path.join(profileDir, 'ort'),
  });
  const first = await session.run(feeds);
  const out = first[session.outputNames[0]];
  fs.writeFileSync(outPath, Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
  const wall = [];
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    wall.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  session.endProfiling();
  const file = fs.readdirSync(profileDir).find((f) => f.endsWith('.json'));
  const events = JSON.parse(fs.readFileSync(path.join(profileDir, file), 'utf8'));
  fs.rmSync(profileDir, { recursive: true, force: true });
  // every run's "model_run" (microseconds), the warm-up first; node kernels summed per op type
  const modelRuns = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').map((e) => e.dur / 1e6);
  if (modelRuns.length !== runs + 1) throw new Error(`profiler: ${modelRuns.length} model_run events, expected ${runs + 1}`);
  const timed = modelRuns.slice(1);
  const ops = {};
  for (const e of events)
    if (e.cat === 'Node' && e.name.endsWith('_kernel_time') && e.args && e.args.op_name)
      ops[e.args.op_name] = (ops[e.args.op_name] || 0) + e.dur / 1e6 / (runs + 1);
  const sorted = [...timed].sort((a, b) => a - b);
  console.log(JSON.stringify({
    t_min: sorted[0], t_med: median(timed), t_max: sorted[sorted.length - 1],
    call_wall_med: median(wall), ops_mean_s: ops, threads, ort: ort.env.versions.common,
  }));
  await session.release();
}

main().catch((e) => {
  console.error(`run_ort: ${e.message}`);
  process.exit(1);
});
