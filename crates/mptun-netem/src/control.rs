//! Runtime control commands (one per line on the emulator's stdin), parsed
//! without I/O so they can be unit-tested.
//!
//! ```text
//! down N                     cut path N (1-based): drop everything, in-flight too
//! up N                       restore path N
//! set N[/ab|/ba] KEY VALUE   change a setting, both directions unless /ab or /ba
//!     KEY: loss-pct | delay-ms | jitter-ms | rate-mbit (0 = unlimited)
//!          | queue-bytes (0 = default) | burst-loss (off | ENTER% LEAVE% [LOSSBAD% [LOSSGOOD%]])
//! stats                      print one JSON line of counters
//! quit                       exit
//! ```

use crate::model::{Dir, Direction, GilbertElliott, LinkModel};
use crate::spec::{mbit, millis, pct};
use crate::NetemError;

#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    LossPct(f64),
    DelayMs(f64),
    JitterMs(f64),
    RateMbit(f64),
    QueueBytes(u64),
    BurstLoss(Option<[f64; 4]>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Up(usize),
    Down(usize),
    /// Path index (1-based), optional direction, setting.
    Set(usize, Option<Dir>, Setting),
    Stats,
    Quit,
    /// Blank line or `#` comment.
    Nop,
}

fn cmd_err(msg: impl Into<String>) -> NetemError {
    NetemError::Command(msg.into())
}

fn num(s: Option<&str>, what: &str) -> Result<f64, NetemError> {
    let s = s.ok_or_else(|| cmd_err(format!("missing {what}")))?;
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| cmd_err(format!("{what}: not a number: {s:?}")))
}

fn path_index(s: Option<&str>) -> Result<usize, NetemError> {
    let s = s.ok_or_else(|| cmd_err("missing path number"))?;
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(cmd_err(format!(
            "bad path number {s:?} (paths count from 1)"
        ))),
    }
}

impl Command {
    pub fn parse(line: &str) -> Result<Command, NetemError> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(Command::Nop);
        }
        let mut it = line.split_whitespace();
        let verb = it.next().unwrap_or_default();
        let cmd = match verb {
            "up" => Command::Up(path_index(it.next())?),
            "down" => Command::Down(path_index(it.next())?),
            "stats" => Command::Stats,
            "quit" | "exit" => Command::Quit,
            "set" => {
                let target = it.next().ok_or_else(|| cmd_err("missing path number"))?;
                let (n, dir) = match target.split_once('/') {
                    Some((n, "ab")) => (n, Some(Dir::AtoB)),
                    Some((n, "ba")) => (n, Some(Dir::BtoA)),
                    Some((_, d)) => return Err(cmd_err(format!("bad direction {d:?}"))),
                    None => (target, None),
                };
                let n = path_index(Some(n))?;
                let key = it.next().ok_or_else(|| cmd_err("missing setting name"))?;
                let setting =
                    match key {
                        "loss-pct" => Setting::LossPct(num(it.next(), key)?),
                        "delay-ms" => Setting::DelayMs(num(it.next(), key)?),
                        "jitter-ms" => Setting::JitterMs(num(it.next(), key)?),
                        "rate-mbit" => Setting::RateMbit(num(it.next(), key)?),
                        "queue-bytes" => {
                            let v = num(it.next(), key)?;
                            if v < 0.0 {
                                return Err(cmd_err("queue-bytes must be >= 0"));
                            }
                            Setting::QueueBytes(v as u64)
                        }
                        "burst-loss" => {
                            let rest: Vec<&str> = it.by_ref().collect();
                            match rest.as_slice() {
                                ["off"] => Setting::BurstLoss(None),
                                [e, l, more @ ..] if more.len() <= 2 => {
                                    let bad = more.first().copied().unwrap_or("100");
                                    let good = more.get(1).copied().unwrap_or("0");
                                    Setting::BurstLoss(Some([
                                        num(Some(e), "enter-bad-pct")?,
                                        num(Some(l), "leave-bad-pct")?,
                                        num(Some(bad), "loss-in-bad-pct")?,
                                        num(Some(good), "loss-in-good-pct")?,
                                    ]))
                                }
                                _ => return Err(cmd_err(
                                    "burst-loss wants: off | ENTER% LEAVE% [LOSSBAD% [LOSSGOOD%]]",
                                )),
                            }
                        }
                        other => return Err(cmd_err(format!("unknown setting {other:?}"))),
                    };
                Command::Set(n, dir, setting)
            }
            other => return Err(cmd_err(format!("unknown command {other:?}"))),
        };
        if let Some(extra) = it.next() {
            return Err(cmd_err(format!("unexpected argument {extra:?}")));
        }
        Ok(cmd)
    }
}

impl Setting {
    /// Validate and apply to one path's model.
    pub fn apply(&self, model: &mut LinkModel, dir: Option<Dir>) -> Result<(), NetemError> {
        // Validate once up front so a bad value changes nothing.
        let f: Box<dyn Fn(&mut Direction)> = match *self {
            Setting::LossPct(v) => {
                let p = pct("loss-pct", v)?;
                Box::new(move |d| d.set_loss(p))
            }
            Setting::DelayMs(v) => {
                let t = millis("delay-ms", v)?;
                Box::new(move |d| d.set_delay(t))
            }
            Setting::JitterMs(v) => {
                let t = millis("jitter-ms", v)?;
                Box::new(move |d| d.set_jitter(t))
            }
            Setting::RateMbit(v) => {
                let r = mbit(v)?;
                Box::new(move |d| d.set_rate(r))
            }
            Setting::QueueBytes(b) => {
                let q = (b > 0).then_some(b);
                Box::new(move |d| d.set_queue_bytes(q))
            }
            Setting::BurstLoss(None) => Box::new(|d| d.set_burst_loss(None)),
            Setting::BurstLoss(Some([e, l, bad, good])) => {
                let ge = GilbertElliott {
                    enter_bad: pct("enter-bad-pct", e)?,
                    leave_bad: pct("leave-bad-pct", l)?,
                    loss_in_bad: pct("loss-in-bad-pct", bad)?,
                    loss_in_good: pct("loss-in-good-pct", good)?,
                };
                Box::new(move |d| d.set_burst_loss(Some(ge)))
            }
        };
        model.apply(dir, |d| f(d));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DirectionConfig;
    use std::time::{Duration, Instant};

    #[test]
    fn parse_commands() {
        assert_eq!(Command::parse("down 2").ok(), Some(Command::Down(2)));
        assert_eq!(Command::parse("  up 1 ").ok(), Some(Command::Up(1)));
        assert_eq!(Command::parse("stats").ok(), Some(Command::Stats));
        assert_eq!(Command::parse("").ok(), Some(Command::Nop));
        assert_eq!(
            Command::parse("set 2 loss-pct 1.0").ok(),
            Some(Command::Set(2, None, Setting::LossPct(1.0)))
        );
        assert_eq!(
            Command::parse("set 3/ba delay-ms 30").ok(),
            Some(Command::Set(3, Some(Dir::BtoA), Setting::DelayMs(30.0)))
        );
        assert_eq!(
            Command::parse("set 1 burst-loss 1 25").ok(),
            Some(Command::Set(
                1,
                None,
                Setting::BurstLoss(Some([1.0, 25.0, 100.0, 0.0]))
            ))
        );
        for bad in [
            "down 0",
            "down x",
            "set 1 foo 1",
            "set 1 loss-pct",
            "set 1/xy loss-pct 1",
            "up 1 2",
            "frob",
            "set 1 loss-pct nan",
        ] {
            assert!(Command::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn apply_settings() {
        let mut m = LinkModel::symmetric(DirectionConfig::default(), 1);
        Setting::DelayMs(30.0)
            .apply(&mut m, Some(Dir::AtoB))
            .expect("valid");
        let t = Instant::now();
        assert_eq!(
            m.handle_arrival(Dir::AtoB, t, 1),
            Some(t + Duration::from_millis(30))
        );
        assert_eq!(m.handle_arrival(Dir::BtoA, t, 1), Some(t));
        assert!(Setting::LossPct(150.0).apply(&mut m, None).is_err());
        Setting::RateMbit(50.0).apply(&mut m, None).expect("valid");
        assert_eq!(m.ba.config().rate_bps, Some(50_000_000));
    }
}
