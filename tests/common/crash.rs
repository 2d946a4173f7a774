//! Killing a writing command at random moments, for the trials that check a killed
//! `--apply` leaves the old or the finished database and never a mixture.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{integrity_ok, Ws};

/// How many trials: `on_ci` where `CI=true`, `here` elsewhere.
pub fn trials(on_ci: u64, here: u64) -> u64 {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        on_ci
    } else {
        here
    }
}

/// A small xorshift generator: reproducible trials without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Kills commands at random moments of a window a little longer than a full run.
pub struct Killer {
    /// From the clock; name it in every failure, so that a trial can be run again.
    pub seed: u64,
    rng: Rng,
    window: u64,
}

impl Killer {
    /// `full_run`: how long the command takes when it is not killed.
    pub fn new(full_run: Duration) -> Killer {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        Killer {
            seed,
            rng: Rng(seed),
            window: full_run.as_micros() as u64 * 12 / 10 + 1,
        }
    }

    /// Runs `command` to its end (it must succeed): a killer whose window fits it.
    pub fn timing(mut command: Command) -> Killer {
        let start = Instant::now();
        let o = command.output().unwrap();
        let full_run = start.elapsed();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        Killer::new(full_run)
    }

    /// A fresh copy of `fixture` on which `command` was started and killed at a
    /// random moment; its database passes SQLite's integrity check.
    pub fn kill_on_copy(
        &mut self,
        fixture: &str,
        trial: u64,
        command: impl FnOnce(&Ws) -> Command,
    ) -> Ws {
        let ws = Ws::copy(fixture);
        self.run(command(&ws));
        assert!(
            integrity_ok(&ws.db()),
            "trial {trial} (seed {}): integrity",
            self.seed
        );
        ws
    }

    /// Starts `command` with its output discarded and kills it (SIGKILL) at a random
    /// moment of the window, then waits for it.
    pub fn run(&mut self, mut command: Command) {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(self.rng.next() % self.window));
        let _ = child.kill();
        let _ = child.wait();
    }
}
