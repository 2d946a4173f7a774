#!/usr/bin/env node
// The `wsledger` command of the npm package `wsledger`. It holds no program of its own:
// npm installs, of the optional dependencies `@wsledger/<platform>-<arch>`, only the one
// whose `os`/`cpu` match this machine, and this file runs the native binary in it with
// the same arguments, stdio and exit status. No install script, no download.
'use strict';

const path = require('path');
const os = require('os');
const { spawnSync } = require('child_process');
const launcher = require('../package.json');

const SCOPE = '@wsledger/';
const CARGO_HINT =
  'install wsledger with cargo instead (needs a Rust toolchain): ' +
  "`cargo install --locked --path .` in a checkout of wsledger's source";

function fail(message, hint) {
  process.stderr.write(`error: ${message}\nhint: ${hint}\n`);
  process.exit(2);
}

// The Linux packages hold binaries linked against glibc and say so (`libc`), so npm
// leaves them out on a musl system such as Alpine.
function isMusl() {
  if (process.platform !== 'linux') return false;
  try {
    return !process.report.getReport().header.glibcVersionRuntime;
  } catch (_) {
    return false;
  }
}

// The platform packages are exactly the launcher's optional dependencies.
function findBinary() {
  const platform = `${process.platform}-${process.arch}`;
  const name = SCOPE + platform;
  const known = Object.keys(launcher.optionalDependencies || {});
  if (!known.includes(name)) {
    const list = known.map((n) => n.slice(SCOPE.length)).join(', ');
    fail(
      `wsledger has no npm package for this platform, \`${platform}\` (there are packages for ${list})`,
      CARGO_HINT,
    );
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${name}/package.json`));
  } catch (_) {
    if (isMusl()) {
      fail(
        `wsledger has no npm package for Linux with the musl C library (\`${platform}\`)`,
        CARGO_HINT,
      );
    }
    fail(
      `\`${name}\`, the package that holds wsledger's binary for \`${platform}\`, is not installed`,
      'reinstall wsledger without `--omit=optional` or `--no-optional` (npm installs only the ' +
        `package of the running platform), or ${CARGO_HINT}`,
    );
  }
  const version = require(path.join(dir, 'package.json')).version;
  if (version !== launcher.version) {
    process.stderr.write(
      `warning: \`${name}\` is version ${version}, the \`wsledger\` launcher ${launcher.version}; ` +
        'reinstall wsledger to get one version\n',
    );
  }
  return path.join(dir, 'bin', process.platform === 'win32' ? 'wsledger.exe' : 'wsledger');
}

const binary = findBinary();

// A signal from the terminal (Ctrl-C) goes to the whole process group, so wsledger gets
// it itself and decides how to stop (it may be finishing a write). The launcher must not
// die first: it holds these signals until wsledger has ended, then ends the way wsledger
// did. spawnSync cannot pass on a signal sent to the launcher's pid alone: that one is
// held too, and the launcher ends by it once wsledger has ended.
const HELD = ['SIGINT', 'SIGTERM', 'SIGHUP'];
let heldSignal = null;
const hold = (sig) => {
  heldSignal = heldSignal || sig;
};
for (const sig of HELD) process.on(sig, hold);

// Ends the launcher by `sig`, so the caller sees what it would have seen without the
// launcher. Where Node keeps a signal for itself (SIGPIPE is ignored, SIGUSR1 starts the
// inspector), or the signal does not end it, exit as a shell reports a signal death.
function dieBy(sig) {
  for (const s of HELD) process.removeListener(s, hold);
  if (sig !== 'SIGPIPE' && sig !== 'SIGUSR1') process.kill(process.pid, sig);
  process.exit(128 + (os.constants.signals[sig] || 0));
}

const result = spawnSync(binary, process.argv.slice(2), { stdio: 'inherit' });

if (result.error) {
  fail(`could not run \`${binary}\`: ${result.error.message}`, `reinstall wsledger, or ${CARGO_HINT}`);
}
if (result.signal) dieBy(result.signal);
const status = result.status === null ? 2 : result.status;
// A signal that arrived while wsledger ran is delivered to its listener on the event
// loop's next turn, which comes before setImmediate's.
setImmediate(() => (heldSignal ? dieBy(heldSignal) : process.exit(status)));
