//! Connected components is GAP's `cc` (issue 63): it prints and serializes
//! as `cc`, `wcc` still parses, and a profile saved when it was named `wcc`
//! still places a `cc` run.

mod common;

use common::rmat;
use locus_analytics::algo::{Algo, Params};
use locus_analytics::engine::Profile;
use locus_analytics::run::{PlacementSource, RunConfig};
use locus_analytics::saved::SavedProfile;
use locus_analytics::store::Backend;

#[test]
fn cc_prints_as_cc_and_wcc_is_an_alias() {
    assert_eq!(Algo::Wcc.name(), "cc");
    assert_eq!(Algo::parse("cc").unwrap(), Algo::Wcc);
    assert_eq!(Algo::parse("wcc").unwrap(), Algo::Wcc);
    assert_eq!(serde_json::to_value(Algo::Wcc).unwrap(), "cc");
    let c = RunConfig::new(Algo::Wcc, Backend::Local, 0.0);
    let (r, _, _) = locus_analytics::run::run::<locus_fabric::local::LocalFabric>(
        &rmat(8, 1, None).grid,
        None,
        &c,
        None,
    )
    .unwrap();
    assert_eq!(serde_json::to_value(&r).unwrap()["algo"], "cc");
    assert_eq!(r.placement_source, None::<PlacementSource>);
}

#[test]
fn a_profile_saved_as_wcc_places_a_cc_run() {
    let g = rmat(8, 1, Some(2));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cc.profile.json");
    let params = Params::default();
    SavedProfile::new(&g.grid, Algo::Wcc, &params, Profile::default())
        .save(&path)
        .unwrap();
    // What a build before the rename wrote.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"algo\":\"cc\""), "{text}");
    std::fs::write(&path, text.replace("\"algo\":\"cc\"", "\"algo\":\"wcc\"")).unwrap();
    let saved = SavedProfile::load(&path).unwrap();
    assert_eq!(saved.origin.algo, "wcc");
    saved
        .check(&path, &g.grid, Algo::Wcc, &params, true)
        .unwrap();
}
