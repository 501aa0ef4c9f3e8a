//! The open-files limit. Every running stdio server holds a few descriptors in the
//! process that manages it (its stdin, stdout and stderr pipes, and its exit
//! watch), so a large fleet needs more than the usual soft limit of 1024. The soft
//! limit is raised as far as the hard limit allows, and a fleet that needs more
//! than that is told so, with numbers, before anything is started.

use crate::platform;

/// Descriptors held per running stdio server, with room to spare: three pipes, an
/// exit watch, a stderr log being appended to, and a socket of a caller.
pub const PER_SERVER: u64 = 6;
/// Descriptors of the manager itself: runtime, control socket, logs, state files.
pub const BASE: u64 = 64;

/// Descriptors kept for the control socket, the state files and the logs (and
/// the refused connections that linger a moment to read their 503), whatever
/// the HTTP doors hold: `status` and `down` are answered during a flood of
/// connections (docs/design.md §10).
pub const RESERVE: u64 = 192;

/// The open-files limit after raising it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    pub soft: u64,
    pub hard: u64,
}

impl OpenFiles {
    /// How many descriptors `servers` stdio servers need at most.
    pub fn needed(servers: usize) -> u64 {
        BASE + PER_SERVER * servers as u64
    }

    /// A warning when `servers` servers running at once could exceed the limit.
    pub fn shortfall(&self, servers: usize) -> Option<String> {
        let needed = Self::needed(servers);
        (self.soft < needed).then(|| {
            format!(
                "the open-files limit is {} (hard limit {}), but {servers} servers may need about {needed}: \
                 servers beyond the limit will fail to start with \"too many open files\"; \
                 raise the hard limit (ulimit -Hn, or LimitNOFILE= in a systemd unit)",
                self.soft, self.hard
            )
        })
    }
}

impl OpenFiles {
    /// Descriptors the HTTP doors may hold at once beside `servers` servers: the
    /// soft limit less what the servers need, less [`RESERVE`].
    pub fn for_doors(&self, servers: usize) -> u64 {
        self.soft
            .saturating_sub(Self::needed(servers))
            .saturating_sub(RESERVE)
    }
}

/// The caps `wanted` (one per door, each at least 1), fitted within `room`:
/// as asked when their sum fits, else each cut in proportion, to at least 1.
pub fn fit(wanted: &[usize], room: u64) -> Vec<usize> {
    let sum: u64 = wanted.iter().map(|&w| w as u64).sum();
    if sum <= room {
        return wanted.to_vec();
    }
    wanted
        .iter()
        .map(|&w| ((w as u128 * room as u128 / sum.max(1) as u128) as usize).max(1))
        .collect()
}

/// Raises the soft open-files limit to the hard limit and returns both.
pub fn raise_open_files() -> OpenFiles {
    match platform::open_files_limit() {
        Ok((soft, hard)) => {
            if soft < hard && platform::set_open_files_limit(hard, hard).is_ok() {
                return OpenFiles { soft: hard, hard };
            }
            OpenFiles { soft, hard }
        }
        Err(_) => OpenFiles {
            soft: u64::MAX,
            hard: u64::MAX,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let raised = raise_open_files();
        let (soft, hard) = platform::open_files_limit().unwrap();
        assert_eq!((raised.soft, raised.hard), (soft, hard));
        assert_eq!(soft, hard);
    }

    #[test]
    fn the_doors_fit_below_the_limit_with_room_for_the_control_socket() {
        let limit = OpenFiles {
            soft: 1024,
            hard: 1024,
        };
        let room = limit.for_doors(10);
        assert_eq!(room, 1024 - OpenFiles::needed(10) - RESERVE);
        assert_eq!(fit(&[512, 64], room), [512, 64], "they fit as asked");
        let cut = fit(&[4096, 512], room);
        assert!(cut.iter().sum::<usize>() as u64 <= room, "{cut:?}");
        assert!(cut[0] > cut[1] && cut[1] >= 1, "{cut:?}");
        let none = OpenFiles {
            soft: 100,
            hard: 100,
        };
        assert_eq!(none.for_doors(10), 0);
        assert_eq!(fit(&[512, 64], 0), [1, 1], "a door never has no room");
        let unknown = OpenFiles {
            soft: u64::MAX,
            hard: u64::MAX,
        };
        assert_eq!(fit(&[512, 64], unknown.for_doors(1000)), [512, 64]);
    }

    #[test]
    fn a_fleet_larger_than_the_limit_is_told_with_numbers() {
        let limit = OpenFiles {
            soft: 1024,
            hard: 1024,
        };
        assert_eq!(limit.shortfall(100), None);
        let warning = limit.shortfall(1000).expect("1000 servers need more");
        assert!(warning.contains("1024"), "{warning}");
        assert!(
            warning.contains(&OpenFiles::needed(1000).to_string()),
            "{warning}"
        );
    }
}
