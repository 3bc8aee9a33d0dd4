//! Where placement comes from (issue 63, requirement 1): by default from
//! block sizes and degrees, known before the run; a saved profile only on
//! the graph it was made on and (unless accepted) from another root; a
//! profiling run only timed and reported with the run.

mod common;

use common::rmat;
use locus_analytics::algo::{default_root, Algo, Params};
use locus_analytics::engine::EngineConfig;
use locus_analytics::placement::degree_profile;
use locus_analytics::run::{run, PlacementSource, RunConfig};
use locus_analytics::saved::SavedProfile;
use locus_analytics::store::{Backend, BlockTable};
use locus_analytics::AnalyticsError;
use locus_fabric::local::{LocalConfig, LocalFabric};

fn fabric() -> LocalFabric {
    LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap()
}

fn cfg(algo: Algo, backend: Backend, placement: PlacementSource) -> RunConfig {
    RunConfig {
        engine: EngineConfig {
            threads: 1,
            buffering: true,
        },
        placement,
        ..RunConfig::new(algo, backend, 0.5)
    }
}

#[test]
fn the_report_names_the_placement_source_and_times_a_profiling_run() {
    let g = rmat(10, 2, Some(4));
    let f = fabric();
    for backend in [Backend::Far, Backend::Disk] {
        let (r, out, _) = run(
            &g.grid,
            Some(&f),
            &cfg(Algo::Bfs, backend, PlacementSource::Degrees),
            None,
        )
        .unwrap();
        assert_eq!(r.placement_source, Some(PlacementSource::Degrees));
        assert_eq!(r.profile_s, None, "no profiling run by default");
        assert!(r.wall_s >= r.time_s + r.setup_s);
        let (p, out2, profile) = run(
            &g.grid,
            Some(&f),
            &cfg(Algo::Bfs, backend, PlacementSource::ProfilingRun),
            None,
        )
        .unwrap();
        assert_eq!(p.placement_source, Some(PlacementSource::ProfilingRun));
        let profile_s = p.profile_s.expect("the profiling run is timed");
        assert!(profile_s > 0.0);
        assert!(p.wall_s >= profile_s + p.time_s + p.setup_s, "{p:?}");
        assert_eq!(
            out.output.digest(),
            out2.output.digest(),
            "placement changes no result"
        );
        let (s, _, _) = run(
            &g.grid,
            Some(&f),
            &cfg(Algo::Bfs, backend, PlacementSource::Degrees),
            Some(&profile),
        )
        .unwrap();
        assert_eq!(s.placement_source, Some(PlacementSource::SavedProfile));
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["placement_source"], "profiling_run");
        assert!(json["profile_s"].as_f64().is_some() && json["wall_s"].as_f64().is_some());
    }
    for backend in [Backend::Local, Backend::Paged] {
        let (r, _, _) = run(
            &g.grid,
            Some(&f),
            &cfg(Algo::Bfs, backend, PlacementSource::ProfilingRun),
            None,
        )
        .unwrap();
        assert_eq!(r.placement_source, None, "{backend:?} places nothing");
        assert_eq!(r.profile_s, None);
    }
}

#[test]
fn saved_placement_without_a_profile_is_refused() {
    let g = rmat(8, 1, Some(2));
    let e = run(
        &g.grid,
        Some(&fabric()),
        &cfg(Algo::Wcc, Backend::Far, PlacementSource::SavedProfile),
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("--profile"), "{e}");
}

#[test]
fn degree_profile_reads_every_block_alike_for_full_passes_and_by_in_degree_for_bfs() {
    let g = rmat(12, 4, Some(8));
    let params = Params::default();
    for algo in [Algo::PageRank, Algo::Wcc] {
        let table = BlockTable::new(&g.grid, algo.orders()).unwrap();
        let p = degree_profile(algo, &params, &table);
        let passes = if algo == Algo::PageRank {
            u64::from(params.iterations)
        } else {
            1
        };
        for (o, pos) in table.blocks() {
            assert_eq!(
                p.block_bytes[o.index()][pos],
                table.block_len(o, pos) * passes
            );
        }
    }
    let table = BlockTable::new(&g.grid, Algo::Bfs.orders()).unwrap();
    let p = degree_profile(Algo::Bfs, &params, &table);
    // Per byte, a block of a partition with more edges into it reads more.
    let shape = table.shape();
    let mut into = vec![0u64; shape.partitions as usize];
    for (o, pos) in table.blocks() {
        into[shape.block_at(o, pos).1 as usize] += table.block_len(o, pos);
    }
    let rate = |o: locus_analytics::Order, pos: usize| {
        p.block_bytes[o.index()][pos] as f64 / table.block_len(o, pos).max(1) as f64
    };
    let blocks: Vec<_> = table
        .blocks()
        .filter(|&(o, pos)| table.block_len(o, pos) > 4096)
        .collect();
    for &(o, a) in &blocks {
        for &(_, b) in &blocks {
            let (ia, ib) = (
                shape.block_at(o, a).0 as usize,
                shape.block_at(o, b).0 as usize,
            );
            if into[ia] > into[ib] + 4096 {
                assert!(rate(o, a) >= rate(o, b), "block {a} vs {b}");
            }
        }
    }
    assert!(rate(blocks[0].0, blocks[0].1) <= 1.0);
}

#[test]
fn a_saved_profile_round_trips_and_is_refused_on_another_graph_or_root() {
    let g = rmat(10, 2, Some(4));
    let other = rmat(10, 3, Some(4));
    let f = fabric();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bfs.profile.json");
    let root_a = default_root(g.grid.out_degree());
    let root_b = (0..g.grid.vertex_count() as u32)
        .find(|&v| v != root_a && g.grid.out_degree()[v as usize] > 0)
        .unwrap();
    let params_a = Params {
        root: Some(root_a),
        ..Params::default()
    };
    let params_b = Params {
        root: Some(root_b),
        ..Params::default()
    };
    let c = RunConfig {
        params: params_a.clone(),
        ..cfg(Algo::Bfs, Backend::Local, PlacementSource::Degrees)
    };
    let (_, _, profile) = run(&g.grid, Some(&f), &c, None).unwrap();
    SavedProfile::new(&g.grid, Algo::Bfs, &params_a, profile.clone())
        .save(&path)
        .unwrap();
    let saved = SavedProfile::load(&path).unwrap();
    assert_eq!(saved.profile, profile);
    assert_eq!(saved.origin.root, Some(root_a));

    // Another root: accepted, and not the same root.
    let ok = saved
        .check(&path, &g.grid, Algo::Bfs, &params_b, false)
        .unwrap();
    assert!(!ok.same_root);
    // The default root is root_a: the leak, refused unless accepted.
    let e = saved
        .check(&path, &g.grid, Algo::Bfs, &Params::default(), false)
        .unwrap_err();
    assert!(matches!(e, AnalyticsError::SavedProfile { .. }));
    assert!(
        e.to_string().contains("root of this run")
            && e.to_string().contains("--profile-same-root-ok"),
        "{e}"
    );
    assert!(
        saved
            .check(&path, &g.grid, Algo::Bfs, &params_a, true)
            .unwrap()
            .same_root
    );
    // Another graph of the same size: refused, naming both.
    let e = saved
        .check(&path, &other.grid, Algo::Bfs, &params_b, true)
        .unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("another graph") && m.contains("bfs.profile.json"),
        "{m}"
    );
    // Another algorithm: refused.
    let e = saved
        .check(&path, &g.grid, Algo::Radii, &params_b, true)
        .unwrap_err();
    assert!(e.to_string().contains("made by bfs from root"), "{e}");
    // Not a profile.
    std::fs::write(&path, "{}").unwrap();
    let e = SavedProfile::load(&path).unwrap_err();
    assert!(e.to_string().contains("not a saved profile"), "{e}");
}
