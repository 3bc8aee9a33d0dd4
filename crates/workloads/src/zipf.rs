//! Zipf-distributed ranks, as YCSB generates them (Gray et al., "Quickly
//! generating billion-record synthetic databases"): rank 0 is the most
//! popular; P(rank = i) is proportional to 1 / (i + 1)^theta. The normalising
//! constant is summed once at construction (O(n)); sampling is O(1).

use rand::Rng;

use crate::error::{Result, WorkloadError};

/// A Zipf distribution over ranks `0..n`.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zeta_n: f64,
    eta: f64,
}

impl Zipf {
    /// Ranks `0..n` with skew `theta` (0 < theta < 1; Pragh and YCSB use 0.99).
    /// `n = 0` is [`WorkloadError::NoItems`], a bad skew [`WorkloadError::Theta`].
    pub fn new(n: u64, theta: f64) -> Result<Zipf> {
        if n == 0 {
            return Err(WorkloadError::NoItems {
                what: "a Zipf distribution",
            });
        }
        if !(theta > 0.0 && theta < 1.0) {
            return Err(WorkloadError::Theta { theta });
        }
        let zeta = |m: u64| (1..=m).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zeta_n = zeta(n);
        let zeta_2 = zeta(2.min(n));
        let alpha = 1.0 / (1.0 - theta);
        let eta = if n > 1 {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n)
        } else {
            1.0
        };
        Ok(Zipf {
            n,
            theta,
            alpha,
            zeta_n,
            eta,
        })
    }

    /// Items.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Draws a rank.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        if self.n == 1 {
            return 0;
        }
        let u: f64 = rng.gen();
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn skewed_towards_low_ranks() {
        let z = Zipf::new(1024, 0.99).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut counts = vec![0u64; 1024];
        for _ in 0..200_000 {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        // P(0) = 1/zeta(1024, 0.99), about 0.13.
        let p0 = counts[0] as f64 / 200_000.0;
        assert!((0.11..0.16).contains(&p0), "p0 = {p0}");
        assert!(counts[0] > counts[10] && counts[10] > counts[500]);
        assert!(counts.iter().all(|&c| c < 200_000));
    }

    #[test]
    fn bad_parameters() {
        let e = Zipf::new(0, 0.99).unwrap_err();
        assert!(matches!(e, WorkloadError::NoItems { .. }), "{e:?}");
        assert!(e.to_string().contains("at least one item"), "{e}");
        assert_eq!(
            Zipf::new(10, 1.0).unwrap_err(),
            WorkloadError::Theta { theta: 1.0 }
        );
        assert_eq!(
            Zipf::new(10, 0.0).unwrap_err(),
            WorkloadError::Theta { theta: 0.0 }
        );
        assert!(matches!(
            Zipf::new(10, f64::NAN),
            Err(WorkloadError::Theta { .. })
        ));
        assert_eq!(
            Zipf::new(1, 0.5).unwrap().sample(&mut rand::thread_rng()),
            0
        );
    }
}
