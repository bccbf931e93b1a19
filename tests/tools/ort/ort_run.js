// Runs an ONNX model with ONNX Runtime's CPU provider (the npm package onnxruntime-node) for the
// ort_* tests and the ORT benchmark: reads one float32 input from a raw little-endian file,
// writes every output as raw float32 (OUT_PREFIX.<name>.f32) and a JSON summary on stdout.
//   node ort_run.js MODEL INPUT_NAME INPUT.f32 DIMS(comma-separated) OUT_PREFIX
//        [--optimized PATH] [--threads N] [--level all|disabled] [--repeat N] [--profile PREFIX]
// --optimized saves the graph after ONNX Runtime's optimizer (optimizedModelFilePath);
// --repeat times that many runs after one warm-up and reports their times in milliseconds.
'use strict';
const fs = require('fs');
const path = require('path');

function fail(msg) {
  process.stderr.write('ort_run.js: ' + msg + '\n');
  process.exit(1);
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length < 5) fail('usage: MODEL INPUT_NAME INPUT.f32 DIMS OUT_PREFIX [options]');
  const [model, inputName, inputFile, dimsText, outPrefix] = args;
  const opt = {optimized: null, threads: 1, level: 'all', repeat: 0, profile: null};
  for (let i = 5; i < args.length; i += 2) {
    const key = args[i].replace(/^--/, '');
    if (!(key in opt) || i + 1 >= args.length) fail('unknown or incomplete option ' + args[i]);
    opt[key] = args[i + 1];
  }
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    fail('cannot load onnxruntime-node (NODE_PATH=' + (process.env.NODE_PATH || '') + '): ' +
         e.message);
  }
  const dims = dimsText.split(',').map(Number);
  const bytes = fs.readFileSync(inputFile);
  const count = dims.reduce((a, b) => a * b, 1);
  if (bytes.length !== count * 4) fail(`${inputFile} holds ${bytes.length} bytes, dims need ${count * 4}`);
  const data = new Float32Array(bytes.buffer, bytes.byteOffset, count);
  const so = {
    graphOptimizationLevel: opt.level,
    intraOpNumThreads: Number(opt.threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
  };
  if (opt.optimized) so.optimizedModelFilePath = path.resolve(opt.optimized);
  if (opt.profile) {
    so.enableProfiling = true;
    so.profileFilePrefix = opt.profile;
  }
  const session = await ort.InferenceSession.create(model, so);
  const feeds = {[inputName]: new ort.Tensor('float32', data, dims)};
  let outputs = await session.run(feeds);
  const times = [];
  for (let r = 0; r < Number(opt.repeat); ++r) {
    const t0 = process.hrtime.bigint();
    outputs = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const summary = {outputs: {}, times_ms: times};
  for (const name of session.outputNames) {
    const t = outputs[name];
    const f = Float32Array.from(t.data, Number);
    fs.writeFileSync(`${outPrefix}.${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.f32`, Buffer.from(f.buffer));
    summary.outputs[name] = {dims: t.dims, type: t.type};
  }
  if (opt.profile) {
    session.endProfiling();  // the file is PREFIX_<date>.json in the working directory
    const dir = path.dirname(path.resolve(opt.profile));
    const base = path.basename(opt.profile);
    summary.profile = fs.readdirSync(dir).filter((f) => f.startsWith(base) && f.endsWith('.json'))
                          .map((f) => path.join(dir, f)).sort().pop();
  }
  process.stdout.write(JSON.stringify(summary) + '\n');
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
