//! The LUBM data generator: UBA's univ-bench data, in Rust, as N-Triples.
//!
//! UBA (the Lehigh University Benchmark's Univ-Bench Artificial generator)
//! builds universities of departments full of people. The counts here are
//! UBA's (`edu.lehigh.swat.bench.uba.Generator`):
//!
//! | what | count |
//! |---|---|
//! | departments per university | 15-25 |
//! | full / associate / assistant professors, lecturers per department | 7-10 / 10-14 / 8-11 / 5-7 |
//! | undergraduate / graduate students | 8-14 / 3-4 per faculty member |
//! | teaching / research assistants | 1 per 4-5 / 1 per 3-4 graduate students |
//! | research groups per department | 10-20 |
//! | courses taught per faculty member | 1-2 undergraduate, 1-2 graduate |
//! | courses taken | 2-4 by an undergraduate, 1-3 by a graduate student |
//! | publications | 15-20 full, 10-18 associate, 5-10 assistant, 0-5 lecturer; a graduate student co-authors 0-5 |
//! | advisors | every graduate student; one undergraduate in 5 |
//! | degrees | undergraduate, masters, doctoral (faculty), undergraduate (graduate students), from a pool of 1,000 universities |
//!
//! Each department's chair (`headOf`) is one of its full professors, drawn
//! at random as in UBA. Names, e-mail
//! addresses and telephones follow UBA's patterns. Only the generated
//! universities get `rdf:type ub:University`; degrees name universities of
//! the whole pool, as UBA's do. Every random choice comes from one
//! xoshiro256++ stream per university seeded from `(seed, university)`, so
//! the output is a function of the settings alone.

use std::io::{self, Write};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::{RdfError, Result};

/// The univ-bench ontology namespace.
pub const UB: &str = "http://swat.cse.lehigh.edu/onto/univ-bench.owl#";
/// `rdf:type`.
pub const RDF_TYPE: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
/// Universities in the degree pool (UBA's `UNIV_NUM`).
pub const DEGREE_POOL: u32 = 1000;
/// Universities at most (LUBM-10240 is Pragh's dataset).
pub const UNIVERSITIES_MAX: u32 = 1 << 16;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lubm {
    /// Universities (LUBM-N).
    pub universities: u32,
    /// Seed of every random choice.
    pub seed: u64,
}

/// How many of each thing were generated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Triples written.
    pub triples: u64,
    /// Departments.
    pub departments: u64,
    /// Full, associate and assistant professors, lecturers.
    pub faculty: [u64; 4],
    /// Undergraduate students.
    pub undergraduates: u64,
    /// Graduate students.
    pub graduates: u64,
    /// Teaching assistants.
    pub teaching_assistants: u64,
    /// Research assistants.
    pub research_assistants: u64,
    /// Research groups.
    pub research_groups: u64,
    /// Undergraduate and graduate courses.
    pub courses: [u64; 2],
    /// Publications.
    pub publications: u64,
}

/// A faculty rank: its class, how many per department, publications each (inclusive ranges).
type Rank = (&'static str, (u32, u32), (u32, u32));

const RANKS: [Rank; 4] = [
    ("FullProfessor", (7, 10), (15, 20)),
    ("AssociateProfessor", (10, 14), (10, 18)),
    ("AssistantProfessor", (8, 11), (5, 10)),
    ("Lecturer", (5, 7), (0, 5)),
];

struct Out<'a, W: Write> {
    w: &'a mut W,
    triples: u64,
}

impl<W: Write> Out<'_, W> {
    fn iri(&mut self, s: &str, p: &str, o: &str) -> io::Result<()> {
        self.triples += 1;
        writeln!(self.w, "<{s}> <{UB}{p}> <{o}> .")
    }
    fn typ(&mut self, s: &str, class: &str) -> io::Result<()> {
        self.triples += 1;
        writeln!(self.w, "<{s}> <{RDF_TYPE}> <{UB}{class}> .")
    }
    fn lit(&mut self, s: &str, p: &str, o: &str) -> io::Result<()> {
        self.triples += 1;
        writeln!(self.w, "<{s}> <{UB}{p}> \"{o}\" .")
    }
}

fn range(rng: &mut Xoshiro256PlusPlus, (lo, hi): (u32, u32)) -> u32 {
    rng.gen_range(lo..=hi)
}

fn univ(u: u32) -> String {
    format!("http://www.University{u}.edu")
}

impl Lubm {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if self.universities == 0 || self.universities > UNIVERSITIES_MAX {
            return Err(RdfError::Setting {
                name: "universities",
                value: self.universities.to_string(),
                expected: "must be 1..=65536",
            });
        }
        Ok(())
    }

    /// Writes the dataset as N-Triples to `w`.
    pub fn write(&self, w: &mut impl Write, progress: &dyn crate::Progress) -> Result<Counts> {
        self.validate()?;
        let mut c = Counts::default();
        let mut out = Out { w, triples: 0 };
        progress.start("universities", self.universities as u64);
        for u in 0..self.universities {
            let seed = self.seed ^ (u as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            university(u, &mut rng, &mut out, &mut c).map_err(|source| RdfError::Io {
                path: "N-Triples output".into(),
                source,
            })?;
            progress.inc(1);
        }
        progress.finish();
        c.triples = out.triples;
        Ok(c)
    }

    /// The dataset as N-Triples bytes (for tests and small runs).
    pub fn to_vec(&self) -> Result<(Vec<u8>, Counts)> {
        let mut buf = Vec::new();
        let c = self.write(&mut buf, &())?;
        Ok((buf, c))
    }
}

fn university<W: Write>(
    u: u32,
    rng: &mut Xoshiro256PlusPlus,
    out: &mut Out<'_, W>,
    c: &mut Counts,
) -> io::Result<()> {
    let uni = univ(u);
    out.typ(&uni, "University")?;
    out.lit(&uni, "name", &format!("University{u}"))?;
    for d in 0..range(rng, (15, 25)) {
        department(u, d, rng, out, c)?;
    }
    Ok(())
}

fn department<W: Write>(
    u: u32,
    d: u32,
    rng: &mut Xoshiro256PlusPlus,
    out: &mut Out<'_, W>,
    c: &mut Counts,
) -> io::Result<()> {
    c.departments += 1;
    let host = format!("Department{d}.University{u}.edu");
    let dept = format!("http://www.{host}");
    out.typ(&dept, "Department")?;
    out.lit(&dept, "name", &format!("Department{d}"))?;
    out.iri(&dept, "subOrganizationOf", &univ(u))?;
    let counts: Vec<u32> = RANKS.iter().map(|r| range(rng, r.1)).collect();
    let chair = rng.gen_range(0..counts[0]);
    // Faculty: (uri, is a professor), in rank order.
    let mut faculty = Vec::new();
    let mut publications = Vec::new();
    let (mut courses, mut grad_courses) = (0u32, 0u32);
    for (r, &(class, _, pubs)) in RANKS.iter().enumerate() {
        for i in 0..counts[r] {
            let name = format!("{class}{i}");
            let me = format!("{dept}/{name}");
            out.typ(&me, class)?;
            out.lit(&me, "name", &name)?;
            for _ in 0..range(rng, (1, 2)) {
                out.iri(&me, "teacherOf", &format!("{dept}/Course{courses}"))?;
                courses += 1;
            }
            for _ in 0..range(rng, (1, 2)) {
                out.iri(
                    &me,
                    "teacherOf",
                    &format!("{dept}/GraduateCourse{grad_courses}"),
                )?;
                grad_courses += 1;
            }
            for p in [
                "undergraduateDegreeFrom",
                "mastersDegreeFrom",
                "doctoralDegreeFrom",
            ] {
                out.iri(&me, p, &univ(rng.gen_range(0..DEGREE_POOL)))?;
            }
            out.iri(&me, "worksFor", &dept)?;
            out.lit(&me, "emailAddress", &format!("{name}@{host}"))?;
            out.lit(&me, "telephone", "xxx-xxx-xxxx")?;
            if r < 3 {
                out.lit(
                    &me,
                    "researchInterest",
                    &format!("Research{}", rng.gen_range(0..30)),
                )?;
            }
            if r == 0 && i == chair {
                out.iri(&me, "headOf", &dept)?;
            }
            for j in 0..range(rng, pubs) {
                let p = format!("{me}/Publication{j}");
                out.typ(&p, "Publication")?;
                out.lit(&p, "name", &format!("Publication{j}"))?;
                out.iri(&p, "publicationAuthor", &me)?;
                publications.push(p);
            }
            faculty.push((me, r < 3));
            c.faculty[r] += 1;
        }
    }
    for (k, n) in [("Course", courses), ("GraduateCourse", grad_courses)] {
        for i in 0..n {
            let course = format!("{dept}/{k}{i}");
            out.typ(&course, k)?;
            out.lit(&course, "name", &format!("{k}{i}"))?;
        }
    }
    c.courses[0] += courses as u64;
    c.courses[1] += grad_courses as u64;
    let professors: Vec<&str> = faculty
        .iter()
        .filter(|f| f.1)
        .map(|f| f.0.as_str())
        .collect();
    let n_faculty = faculty.len() as u32;
    let person = |out: &mut Out<'_, W>, me: &str, name: &str| -> io::Result<()> {
        out.lit(me, "name", name)?;
        out.iri(me, "memberOf", &dept)?;
        out.lit(me, "emailAddress", &format!("{name}@{host}"))?;
        out.lit(me, "telephone", "xxx-xxx-xxxx")
    };
    let undergraduates = n_faculty * range(rng, (8, 14));
    for i in 0..undergraduates {
        let name = format!("UndergraduateStudent{i}");
        let me = format!("{dept}/{name}");
        out.typ(&me, "UndergraduateStudent")?;
        person(out, &me, &name)?;
        for k in distinct(rng, (2, 4), courses) {
            out.iri(&me, "takesCourse", &format!("{dept}/Course{k}"))?;
        }
        if rng.gen_range(0..5) == 0 {
            out.iri(
                &me,
                "advisor",
                professors[rng.gen_range(0..professors.len())],
            )?;
        }
    }
    let graduates = n_faculty * range(rng, (3, 4));
    for i in 0..graduates {
        let name = format!("GraduateStudent{i}");
        let me = format!("{dept}/{name}");
        out.typ(&me, "GraduateStudent")?;
        person(out, &me, &name)?;
        for k in distinct(rng, (1, 3), grad_courses) {
            out.iri(&me, "takesCourse", &format!("{dept}/GraduateCourse{k}"))?;
        }
        out.iri(
            &me,
            "advisor",
            professors[rng.gen_range(0..professors.len())],
        )?;
        out.iri(
            &me,
            "undergraduateDegreeFrom",
            &univ(rng.gen_range(0..DEGREE_POOL)),
        )?;
        for k in distinct(rng, (0, 5), publications.len() as u32) {
            out.iri(&publications[k as usize], "publicationAuthor", &me)?;
        }
    }
    // Assistants: distinct graduate students, teaching assistants first.
    let tas = graduates / range(rng, (4, 5));
    let ras = graduates / range(rng, (3, 4));
    let all = (tas + ras).min(graduates);
    let chosen = distinct(rng, (all, all), graduates);
    for (n, &g) in chosen.iter().enumerate() {
        let me = format!("{dept}/GraduateStudent{g}");
        if (n as u32) < tas {
            out.typ(&me, "TeachingAssistant")?;
            out.iri(
                &me,
                "teachingAssistantOf",
                &format!("{dept}/Course{}", rng.gen_range(0..courses)),
            )?;
            c.teaching_assistants += 1;
        } else {
            out.typ(&me, "ResearchAssistant")?;
            c.research_assistants += 1;
        }
    }
    let groups = range(rng, (10, 20));
    for g in 0..groups {
        let me = format!("{dept}/ResearchGroup{g}");
        out.typ(&me, "ResearchGroup")?;
        out.iri(&me, "subOrganizationOf", &dept)?;
    }
    c.undergraduates += undergraduates as u64;
    c.graduates += graduates as u64;
    c.research_groups += groups as u64;
    c.publications += publications.len() as u64;
    Ok(())
}

/// `k` (drawn from a range) distinct numbers below `n` (at most `n`), in the order drawn.
fn distinct(rng: &mut Xoshiro256PlusPlus, k: (u32, u32), n: u32) -> Vec<u32> {
    let k = range(rng, k).min(n);
    let mut got = Vec::with_capacity(k as usize);
    while (got.len() as u32) < k {
        let x = rng.gen_range(0..n);
        if !got.contains(&x) {
            got.push(x);
        }
    }
    got
}
