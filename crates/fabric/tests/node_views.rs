//! Node views (`hosting_only`) of the simulated and in-process fabrics: each
//! hosts one machine of a shared cluster, as a TCP node hosts its own, so
//! software that creates the regions of the machines it hosts runs as several
//! nodes of one cluster in one process; in a simulation, each node an actor.

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::sim::{Actor, Sim, SimConfig, SimFabric};
use locus_fabric::{Fabric, FabricError, Fencing, MachineId, Port, Result};

trait Views: Fencing + Sized {
    fn view(&self, m: MachineId) -> Result<Self>;
    fn crash_machine(&self, m: MachineId) -> Result<()>;
}

impl Views for SimFabric {
    fn view(&self, m: MachineId) -> Result<Self> {
        self.hosting_only(m)
    }
    fn crash_machine(&self, m: MachineId) -> Result<()> {
        self.crash(m)
    }
}

impl Views for LocalFabric {
    fn view(&self, m: MachineId) -> Result<Self> {
        self.hosting_only(m)
    }
    fn crash_machine(&self, m: MachineId) -> Result<()> {
        self.crash(m)
    }
}

fn a_view_hosts_one_machine<F: Views>(cluster: &F) {
    let nodes: Vec<F> = (0..3).map(|m| cluster.view(m).unwrap()).collect();
    fn not_hosted<T>(machine: MachineId) -> Result<T> {
        Err(FabricError::NotHosted { machine })
    }
    for (m, node) in nodes.iter().enumerate() {
        let m = m as MachineId;
        assert_eq!(node.machine_count(), 3);
        for x in 0..4 {
            assert_eq!(node.hosts(x), x == m, "node {m} hosts {x}?");
        }
        let other = (m + 1) % 3;
        assert_eq!(node.register(other, "x", 8), not_hosted(other));
        assert!(matches!(
            node.port(other),
            Err(FabricError::NotHosted { machine }) if machine == other
        ));
        assert_eq!(
            node.wake_on_message(other, std::thread::current()),
            not_hosted(other)
        );
        assert_eq!(node.fence(other), not_hosted(other));
        assert_eq!(node.set_own_epoch(other, 1), not_hosted(other));
        assert_eq!(node.crash_machine(other), not_hosted(other));
        assert!(matches!(
            node.view(other),
            Err(FabricError::NotHosted { .. })
        ));
        assert!(matches!(
            node.view(3),
            Err(FabricError::NoSuchMachine { machine: 3, .. })
        ));
        assert!(node.view(m).is_ok(), "a view of its own machine");
    }
    // Each node registers its own region; every node looks up and reaches all.
    let regions: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(m, n)| n.register(m as MachineId, "mine", 64).unwrap().id)
        .collect();
    for (m, node) in nodes.iter().enumerate() {
        let mut p = node.port(m as MachineId).unwrap();
        for (x, &r) in regions.iter().enumerate() {
            let x = x as MachineId;
            assert_eq!(node.lookup(x, "mine").unwrap().id, r);
            p.fetch_add(x, r, 0, 1).unwrap();
        }
        p.send(((m + 1) % 3) as MachineId, &[m as u8]).unwrap();
    }
    for (m, node) in nodes.iter().enumerate() {
        let m = m as MachineId;
        let mut p = node.port(m).unwrap();
        assert_eq!(p.read_word(m, regions[m as usize], 0).unwrap(), 3);
        let msg = p
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap()
            .expect("the message");
        assert_eq!(msg.from, (m + 2) % 3);
    }
    // Each node has its own epoch table: node 2 marks machine 0 down, node 1 does not.
    nodes[2].mark_down(2, 0, 1).unwrap();
    let mut p2 = nodes[2].port(2).unwrap();
    assert!(matches!(
        p2.read_word(0, regions[0], 0),
        Err(FabricError::PeerUnavailable { machine: 0, .. })
    ));
    let mut p1 = nodes[1].port(1).unwrap();
    assert_eq!(p1.read_word(0, regions[0], 0).unwrap(), 3);
    // The whole cluster still hosts every machine.
    assert!((0..3).all(|m| cluster.hosts(m)));
}

#[test]
fn a_view_hosts_one_machine_sim() {
    let s = Sim::new(SimConfig {
        machines: 3,
        ..SimConfig::with_seed(5)
    })
    .unwrap();
    a_view_hosts_one_machine(s.fabric());
}

#[test]
fn a_view_hosts_one_machine_local() {
    let f = LocalFabric::new(LocalConfig::with_machines(3)).unwrap();
    a_view_hosts_one_machine(&f);
}

/// Three nodes as actors of one run, each through its own view: each
/// increments a counter on every machine, then node 1 crashes and restarts
/// (re-registering through its view) while the others go on; the counters
/// come out the same for the same seed.
fn three_nodes(seed: u64) -> Vec<u64> {
    let mut s = Sim::new(SimConfig {
        machines: 3,
        ..SimConfig::with_seed(seed)
    })
    .unwrap();
    let nodes: Vec<SimFabric> = (0..3)
        .map(|m| s.fabric().hosting_only(m).unwrap())
        .collect();
    let regions: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(m, n)| n.register(m as MachineId, "count", 64).unwrap().id)
        .collect();
    let actors: Vec<Actor> = nodes
        .iter()
        .enumerate()
        .map(|(m, node)| {
            let node = node.clone();
            let regions = regions.clone();
            Box::new(move |_: &SimFabric| {
                let me = m as MachineId;
                let mut p = node.port(me).unwrap();
                for round in 0..20u64 {
                    for (x, &r) in regions.iter().enumerate() {
                        // Machine 1's old region fails after its crash; a
                        // write to the new one below is what counts there.
                        let _ = p.fetch_add(x as MachineId, r, round % 8 * 8, 1);
                    }
                    if me == 1 && round == 10 {
                        node.crash(1).unwrap();
                        let r = node.register(1, "count", 64).unwrap().id;
                        p = node.port(1).unwrap();
                        p.write_word(1, r, 0, 1000).unwrap();
                    }
                }
            }) as Actor
        })
        .collect();
    s.run(actors).unwrap();
    let mut p = s.fabric().port(0).unwrap();
    let mut words = Vec::new();
    for m in 0..3 {
        let r = s.fabric().lookup(m, "count").unwrap().id;
        words.extend((0..8).map(|w| p.read_word(m, r, w * 8).unwrap()));
    }
    words
}

#[test]
fn three_nodes_of_one_simulation_are_a_function_of_the_seed() {
    for seed in 0..4 {
        let words = three_nodes(seed);
        assert_eq!(words, three_nodes(seed), "seed {seed}");
        assert_eq!(words[..8].iter().sum::<u64>(), 60, "seed {seed}: machine 0");
        assert_eq!(
            words[16..].iter().sum::<u64>(),
            60,
            "seed {seed}: machine 2"
        );
        assert!(
            words[8] >= 1000,
            "seed {seed}: machine 1 restarted: {words:?}"
        );
    }
}
