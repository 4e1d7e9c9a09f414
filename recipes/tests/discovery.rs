//! `ServiceDiscovery` against a real server: register, query, update and unregister in
//! every service type; an instance of a killed session disappears (and comes back if its
//! client renews its session); and zkwire and Apache Curator 5.4.0 discovery
//! (`curator-x-discovery`, `JsonInstanceSerializer` with a `Map` payload, driven through a
//! small Java program) read each other's instances field by field.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use zkwire::Error;
use zkwire_recipes::{
    DownInstancePolicy, LockError, ProviderStrategy, ServiceCache, ServiceDiscovery,
    ServiceInstance, ServiceProvider, ServiceType, UriSpec,
};
use zkwire_testing::java;
use zkwire_testing::support::{connect_renewing, kill_client_session};

use support::jvm::{CuratorServer, Jvm};
use support::{created_again, fresh_clients, owned_by_the_new_session, poll_until};

const T: Duration = Duration::from_secs(4);
/// The bound of every wait in these tests.
const STEP: Duration = Duration::from_secs(20);

/// An instance with every field set.
fn full_instance(name: &str, id: &str) -> ServiceInstance {
    ServiceInstance::builder(name)
        .id(id)
        .address("10.0.0.7")
        .port(8080)
        .ssl_port(8443)
        .payload(json!({"zone": "eu-1", "weight": 3, "tags": ["a", "b"], "nested": {"x": true}}))
        .registration_time_utc(1_700_000_000_123)
        .uri_spec(UriSpec::parse("{scheme}://{address}:{port}/v1").unwrap())
        .build()
}

/// Polls `query` until it gives `want`; panics after STEP with what it gave.
async fn wait_for_ids(discovery: &ServiceDiscovery, name: &str, want: &[&str]) {
    poll_until!(STEP, Duration::from_millis(20), {
        let instances = discovery.query_for_instances(name).await.unwrap();
        let seen: Vec<String> = instances.into_iter().map(|i| i.id).collect();
        if seen == want {
            Ok(())
        } else {
            Err(format!("{name}: {seen:?}, not {want:?}"))
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_query_update_and_unregister() {
    tokio::time::timeout(4 * STEP, async {
        let (_, [client, reader]) = fresh_clients("discovery_basic", T).await;
        let discovery = ServiceDiscovery::new(client.clone(), "/services");
        let view = ServiceDiscovery::new(reader.clone(), "/services");
        assert!(view.query_for_names().await.unwrap().is_empty());

        let api = full_instance("api", "api-1");
        let mut api_reg = discovery.register(api.clone()).await.unwrap();
        assert_eq!(api_reg.path().as_deref(), Some("/services/api/api-1"));
        let plain = ServiceInstance::builder("api").build();
        let plain_reg = discovery.register(plain.clone()).await.unwrap();
        let db = ServiceInstance::builder("db")
            .id("db-1")
            .service_type(ServiceType::Static)
            .build();
        let db_reg = discovery.register(db.clone()).await.unwrap();
        let perm = ServiceInstance::builder("db")
            .id("db-2")
            .service_type(ServiceType::Permanent)
            .build();
        let perm_reg = discovery.register(perm.clone()).await.unwrap();
        let seq = ServiceInstance::builder("jobs")
            .id("job-")
            .service_type(ServiceType::DynamicSequential)
            .build();
        let seq_reg = discovery.register(seq.clone()).await.unwrap();

        assert_eq!(view.query_for_names().await.unwrap(), ["api", "db", "jobs"]);
        let mut want = vec![api.clone(), plain.clone()];
        want.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(view.query_for_instances("api").await.unwrap(), want);
        assert_eq!(
            view.query_for_instance("api", "api-1").await.unwrap(),
            Some(api.clone())
        );
        assert_eq!(view.query_for_instance("api", "nope").await.unwrap(), None);
        assert_eq!(view.query_for_instances("nope").await.unwrap(), []);
        // A name of two segments would read a node further down: refused, as on register.
        assert!(matches!(
            view.query_for_instances("api/api-1").await,
            Err(LockError::Client(Error::InvalidPath(_)))
        ));
        assert!(matches!(
            view.query_for_instance("api", "api-1/x").await,
            Err(LockError::Client(Error::InvalidPath(_)))
        ));
        assert_eq!(
            view.query_for_instances("db").await.unwrap(),
            [db, perm.clone()]
        );
        assert_eq!(view.query_for_instances("jobs").await.unwrap(), [seq]);

        // The modes are Curator's.
        let owner = |p: String| {
            let reader = reader.clone();
            async move { reader.exists(&p).await.unwrap().unwrap().ephemeral_owner }
        };
        assert_eq!(
            owner("/services/api/api-1".into()).await,
            client.session_id()
        );
        assert_eq!(owner("/services/db/db-1".into()).await, 0);
        assert_eq!(owner("/services/db/db-2".into()).await, 0);
        let seq_path = seq_reg.path().unwrap();
        assert!(seq_path.starts_with("/services/jobs/_c_"), "{seq_path}");
        assert!(seq_path.contains("-job-00000000"), "{seq_path}");
        assert_eq!(owner(seq_path).await, client.session_id());

        // Update: the node gets the new JSON; a changed id is refused.
        let mut moved = api.clone();
        moved.port = Some(9090);
        moved.payload = Some(json!({"zone": "eu-2"}));
        api_reg.update(moved.clone()).await.unwrap();
        assert_eq!(
            view.query_for_instance("api", "api-1").await.unwrap(),
            Some(moved.clone())
        );
        let mut other = moved.clone();
        other.id = "api-9".into();
        assert!(matches!(
            api_reg.update(other).await,
            Err(LockError::Client(Error::InvalidArgument(_)))
        ));

        // An outside delete: registered again.
        reader.delete("/services/api/api-1", None).await.unwrap();
        let mut both = vec![plain.id.as_str(), "api-1"];
        both.sort_unstable();
        wait_for_ids(&view, "api", &both).await;
        assert_eq!(
            view.query_for_instance("api", "api-1").await.unwrap(),
            Some(moved)
        );

        // Unregister; a dropped registration unregisters too, a permanent one stays.
        api_reg.unregister().await.unwrap();
        drop(plain_reg);
        db_reg.unregister().await.unwrap();
        seq_reg.unregister().await.unwrap();
        drop(perm_reg);
        wait_for_ids(&view, "api", &[]).await;
        wait_for_ids(&view, "jobs", &[]).await;
        assert_eq!(
            view.query_for_instances("db").await.unwrap(),
            std::slice::from_ref(&perm)
        );
        let perm_reg = discovery.register(perm).await.unwrap();
        perm_reg.unregister().await.unwrap();
        wait_for_ids(&view, "db", &[]).await;

        // Bad names.
        for (name, id) in [
            ("a/b", "x"),
            ("a", "x/y"),
            ("", "x"),
            ("a", ".."),
            ("..", "x"),
        ] {
            let bad = ServiceInstance::builder(name).id(id).build();
            assert!(matches!(
                discovery.register(bad).await,
                Err(LockError::Client(Error::InvalidPath(_)))
            ));
        }
        client.close().await.unwrap();
        reader.close().await.unwrap();
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_sessions_instance_disappears_and_a_renewing_one_comes_back() {
    tokio::time::timeout(4 * STEP, async {
        let (cs, [watcher, plain]) = fresh_clients("discovery_killed", T).await;
        let renewing = connect_renewing(&cs, T).await;
        let view = ServiceDiscovery::new(watcher.clone(), "/services");
        let doomed = ServiceDiscovery::new(plain.clone(), "/services")
            .register(full_instance("api", "doomed"))
            .await
            .unwrap();
        let phoenix_instance = full_instance("api", "phoenix");
        let phoenix = ServiceDiscovery::new(renewing.clone(), "/services")
            .register(phoenix_instance.clone())
            .await
            .unwrap();
        wait_for_ids(&view, "api", &["doomed", "phoenix"]).await;

        // Without renewal: gone for good.
        let killed = Instant::now();
        kill_client_session(&plain).await.unwrap();
        wait_for_ids(&view, "api", &["phoenix"]).await;
        println!(
            "the killed instance disappeared after {:?}",
            killed.elapsed()
        );
        // Its node saw the expiry, or finds the node gone with the session when closed.
        let unregistered = doomed.unregister().await;
        assert!(
            matches!(
                unregistered,
                Ok(()) | Err(LockError::Client(Error::SessionExpired))
            ),
            "{unregistered:?}"
        );

        // With renewal: registered again by the new session, with the same JSON.
        let mut events = phoenix.node().unwrap().events();
        let (old, created) = created_again(&renewing, &mut events, STEP).await;
        assert_eq!(created, "/services/api/phoenix");
        owned_by_the_new_session(&watcher, &created, &renewing, old).await;
        assert_eq!(
            view.query_for_instance("api", "phoenix").await.unwrap(),
            Some(phoenix_instance)
        );
        phoenix.unregister().await.unwrap();
        wait_for_ids(&view, "api", &[]).await;
        watcher.close().await.unwrap();
        renewing.close().await.unwrap();
    })
    .await
    .expect("bounded");
}

/// Curator discovery in a JVM: `CuratorDiscovery <connect> <basePath>`, then commands on
/// stdin: `GET <name> <id>` (answers `JSON <Curator's JSON of what it read>` then
/// `CLASS <payload class>`, or `NONE`), `RAW <path>` (the same, read with payload class
/// `Object`), `REGISTER <name> <id>` (registers a DYNAMIC
/// instance with every field set, payload a Map; answers `OK`), `UNREGISTER` (`OK`),
/// `NAMES` (`NAMES a b ...`), `URI <name> <id>` (`URI <the instance's buildUriSpec()>`),
/// `PICK <name> <n>` (n picks of a round-robin `ServiceProvider` for name, started on first
/// use: `PICKED id ...`, `-` for none), `CACHE <name>` (the ids
/// a `ServiceCache` for name, started on first use, holds: `CACHE id ...`, sorted). Kept
/// here, written out and compiled at run time.
const CURATOR_DISCOVERY: CuratorServer = CuratorServer {
    class: "CuratorDiscovery",
    imports: r#"
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeSet;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceProvider;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.curator.x.discovery.UriSpec;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;
import org.apache.curator.x.discovery.strategies.RoundRobinStrategy;"#,
    setup: r#"
            JsonInstanceSerializer<Map> serializer = new JsonInstanceSerializer<>(Map.class);
            ServiceDiscovery<Map> discovery = ServiceDiscoveryBuilder.builder(Map.class)
                .client(client).basePath(args[1]).serializer(serializer).build();
            discovery.start();
            ServiceInstance<Map> mine = null;
            Map<String, ServiceProvider<Map>> providers = new HashMap<>();
            Map<String, ServiceCache<Map>> caches = new HashMap<>();"#,
    commands: r#"
                String[] w = line.split(" ");
                if (w[0].equals("GET")) {
                    ServiceInstance<Map> found = discovery.queryForInstance(w[1], w[2]);
                    if (found == null) {
                        System.out.println("NONE");
                    } else {
                        System.out.println("JSON " + new String(
                            serializer.serialize(found), StandardCharsets.UTF_8));
                        Object payload = found.getPayload();
                        System.out.println("CLASS "
                            + (payload == null ? "null" : payload.getClass().getName()));
                    }
                } else if (w[0].equals("RAW")) {
                    JsonInstanceSerializer<Object> any =
                        new JsonInstanceSerializer<>(Object.class);
                    ServiceInstance<Object> found =
                        any.deserialize(client.getData().forPath(w[1]));
                    System.out.println("JSON " + new String(
                        any.serialize(found), StandardCharsets.UTF_8));
                    System.out.println("CLASS " + found.getPayload().getClass().getName());
                } else if (w[0].equals("REGISTER")) {
                    Map<String, Object> payload = new LinkedHashMap<>();
                    payload.put("zone", "us-2");
                    payload.put("weight", 7);
                    payload.put("tags", Arrays.asList("x", "y"));
                    mine = ServiceInstance.<Map>builder().name(w[1]).id(w[2])
                        .address("192.168.1.9").port(7070).sslPort(7443).payload(payload)
                        .registrationTimeUTC(1_600_000_000_456L)
                        .serviceType(ServiceType.DYNAMIC)
                        .uriSpec(new UriSpec("{scheme}://{address}:{ssl-port}/x")).build();
                    discovery.registerService(mine);
                    System.out.println("OK");
                } else if (w[0].equals("UNREGISTER")) {
                    discovery.unregisterService(mine);
                    System.out.println("OK");
                } else if (w[0].equals("URI")) {
                    ServiceInstance<Map> found = discovery.queryForInstance(w[1], w[2]);
                    System.out.println("URI " + found.buildUriSpec());
                } else if (w[0].equals("PICK")) {
                    ServiceProvider<Map> provider = providers.get(w[1]);
                    if (provider == null) {
                        provider = discovery.serviceProviderBuilder().serviceName(w[1])
                            .providerStrategy(new RoundRobinStrategy<Map>()).build();
                        provider.start();
                        providers.put(w[1], provider);
                    }
                    StringBuilder out = new StringBuilder("PICKED");
                    for (int i = 0; i < Integer.parseInt(w[2]); i++) {
                        ServiceInstance<Map> picked = provider.getInstance();
                        out.append(' ').append(picked == null ? "-" : picked.getId());
                    }
                    System.out.println(out);
                } else if (w[0].equals("CACHE")) {
                    ServiceCache<Map> cache = caches.get(w[1]);
                    if (cache == null) {
                        cache = discovery.serviceCacheBuilder().name(w[1]).build();
                        cache.start();
                        caches.put(w[1], cache);
                    }
                    TreeSet<String> ids = new TreeSet<>();
                    for (ServiceInstance<Map> instance : cache.getInstances()) {
                        ids.add(instance.getId());
                    }
                    StringBuilder out = new StringBuilder("CACHE");
                    for (String id : ids) {
                        out.append(' ').append(id);
                    }
                    System.out.println(out);
                } else if (w[0].equals("NAMES")) {
                    StringBuilder out = new StringBuilder("NAMES");
                    for (String name : new TreeSet<>(discovery.queryForNames())) {
                        out.append(' ').append(name);
                    }
                    System.out.println(out);
                }"#,
    teardown: r#"
            for (ServiceProvider<Map> provider : providers.values()) {
                provider.close();
            }
            for (ServiceCache<Map> cache : caches.values()) {
                cache.close();
            }
            discovery.close();"#,
};

/// Curator's classpath with curator-x-discovery and Jackson (Debian's
/// `libcurator-discovery-java`).
fn discovery_classpath() -> OsString {
    let base = java::curator_classpath().unwrap_or_else(|e| panic!("{e}"));
    let dir = Path::new("/usr/share/java");
    let extra = [
        "curator-x-discovery.jar",
        "jackson-databind.jar",
        "jackson-core.jar",
        "jackson-annotations.jar",
    ]
    .map(|jar| dir.join(jar));
    for jar in &extra {
        assert!(
            jar.is_file(),
            "{} missing: install it with `apt-get install -y libcurator-discovery-java`",
            jar.display()
        );
    }
    let paths = std::env::split_paths(&base).chain(extra);
    std::env::join_paths(paths).unwrap()
}

/// What Curator (`curator`, running [`CURATOR_DISCOVERY`]) reads at `name/id`: its own JSON
/// of it, and the payload's class.
async fn curator_get(curator: &mut Jvm, name: &str, id: &str) -> Option<(String, String)> {
    curator_read(curator, &format!("GET {name} {id}")).await
}

/// Polls until Curator's `ServiceCache` for `name` holds exactly `want` (sorted ids).
async fn wait_for_curator_cache(curator: &mut Jvm, name: &str, want: &[&str]) {
    let want = std::iter::once("CACHE")
        .chain(want.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let deadline = Instant::now() + STEP;
    loop {
        let seen = curator.ask(&format!("CACHE {name}"), STEP).await;
        if seen == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Curator's cache: {seen}, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Curator's answer to a `GET` or `RAW`: its JSON of what it read and the payload's class,
/// or `None` when it found nothing.
async fn curator_read(curator: &mut Jvm, command: &str) -> Option<(String, String)> {
    let line = curator.ask(command, STEP).await;
    if line == "NONE" {
        return None;
    }
    let json = line.strip_prefix("JSON ").expect(&line).to_owned();
    let class_line = curator.io.next_line(STEP).await;
    let class = class_line
        .strip_prefix("CLASS ")
        .expect(&class_line)
        .to_owned();
    Some((json, class))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkwire_and_curator_discovery_read_each_others_instances() {
    let program =
        tokio::task::block_in_place(|| CURATOR_DISCOVERY.compile_against(&discovery_classpath()));
    tokio::time::timeout(6 * STEP, async {
        let (cs, [client]) = fresh_clients("discovery_curator", T).await;
        let discovery = ServiceDiscovery::new(client.clone(), "/services");
        let mut curator = CURATOR_DISCOVERY.start(&program, &[&cs, "/services"]).await;

        // Ours, read by Curator: every field equal, the payload parsed as a Map.
        let ours = full_instance("api", "zk-1");
        let ours_reg = discovery.register(ours.clone()).await.unwrap();
        let (json, class) = curator_get(&mut curator, "api", "zk-1")
            .await
            .expect("Curator finds ours");
        assert_eq!(class, "java.util.LinkedHashMap");
        let read_back = ServiceInstance::from_json(json.as_bytes()).unwrap();
        assert_eq!(read_back, ours, "Curator's JSON of ours: {json}");
        let (data, _) = client.get_data("/services/api/zk-1").await.unwrap();
        assert_eq!(
            std::str::from_utf8(&data).unwrap(),
            json,
            "Curator writes what we write, byte for byte"
        );
        let uri = ours.build_uri().unwrap();
        assert_eq!(uri, "https://10.0.0.7:8080/v1");
        assert_eq!(
            curator.ask("URI api zk-1", STEP).await,
            format!("URI {uri}")
        );
        // A payload that is not an object, and none.
        let mut scalar = full_instance("api", "zk-2");
        scalar.payload = Some(json!(["one", 2]));
        let scalar_reg = discovery.register(scalar.clone()).await.unwrap();
        // (A reader with payload class Map refuses a list, as Curator's own would.)
        let (json, class) = curator_read(&mut curator, "RAW /services/api/zk-2")
            .await
            .unwrap();
        assert_eq!(class, "java.util.ArrayList", "{json}");
        assert_eq!(ServiceInstance::from_json(json.as_bytes()).unwrap(), scalar);
        let mut none = full_instance("api", "zk-3");
        none.payload = None;
        none.uri_spec = None;
        none.port = None;
        let none_reg = discovery.register(none.clone()).await.unwrap();
        let (json, class) = curator_get(&mut curator, "api", "zk-3").await.unwrap();
        assert_eq!(class, "null");
        assert_eq!(ServiceInstance::from_json(json.as_bytes()).unwrap(), none);

        // Curator's, read by us.
        assert_eq!(curator.ask("REGISTER web java-1", STEP).await, "OK");
        let theirs = discovery
            .query_for_instance("web", "java-1")
            .await
            .unwrap()
            .expect("we find Curator's");
        let uri = format!("URI {}", theirs.build_uri().unwrap());
        assert_eq!(
            curator.ask("URI web java-1", STEP).await,
            uri,
            "one URI from one spec"
        );
        let want = ServiceInstance::builder("web")
            .id("java-1")
            .address("192.168.1.9")
            .port(7070)
            .ssl_port(7443)
            .payload(json!({"zone": "us-2", "weight": 7, "tags": ["x", "y"]}))
            .registration_time_utc(1_600_000_000_456)
            .uri_spec(UriSpec::parse("{scheme}://{address}:{ssl-port}/x").unwrap())
            .build();
        assert_eq!(theirs, want);
        let (_, stat) = client.get_data("/services/web/java-1").await.unwrap();
        assert_ne!(
            stat.ephemeral_owner, 0,
            "DYNAMIC is ephemeral in Curator too"
        );
        assert_eq!(discovery.query_for_names().await.unwrap(), ["api", "web"]);
        assert_eq!(curator.ask("NAMES", STEP).await, "NAMES api web");

        // Leaving, both ways.
        assert_eq!(curator.ask("UNREGISTER", STEP).await, "OK");
        assert_eq!(discovery.query_for_instances("web").await.unwrap(), []);
        ours_reg.unregister().await.unwrap();
        scalar_reg.unregister().await.unwrap();
        none_reg.unregister().await.unwrap();
        assert_eq!(curator_get(&mut curator, "api", "zk-1").await, None);
        client.close().await.unwrap();
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_follows_the_instances_and_providers_pick_by_strategy() {
    tokio::time::timeout(4 * STEP, async {
        let (_, [client]) = fresh_clients("discovery_cache", T).await;
        let discovery = ServiceDiscovery::new(client.clone(), "/services");
        for bad in ["a/b", "", ".."] {
            assert!(matches!(
                ServiceCache::start(&discovery, bad).await,
                Err(LockError::Client(Error::InvalidPath(_)))
            ));
        }
        // The service's directory does not exist yet.
        let (cache, mut changes) = ServiceCache::start(&discovery, "api").await.unwrap();
        assert!(cache.instances().is_empty());
        let round = ServiceProvider::start(&discovery, "api", ProviderStrategy::RoundRobin)
            .await
            .unwrap();
        let sticky = ServiceProvider::start(&discovery, "api", ProviderStrategy::Sticky)
            .await
            .unwrap();
        let random = ServiceProvider::start(&discovery, "api", ProviderStrategy::Random)
            .await
            .unwrap();
        assert_eq!(round.instance(), None);

        let mut regs = Vec::new();
        for id in ["a", "b", "c"] {
            regs.push(discovery.register(full_instance("api", id)).await.unwrap());
        }
        let ids = |instances: Vec<ServiceInstance>| -> Vec<String> {
            instances.into_iter().map(|i| i.id).collect()
        };
        let deadline = Instant::now() + STEP;
        while ids(cache.instances()) != ["a", "b", "c"]
            || round.all_instances().len() != 3
            || sticky.all_instances().len() != 3
            || random.all_instances().len() != 3
        {
            assert!(Instant::now() < deadline, "{:?}", ids(cache.instances()));
            let _ = tokio::time::timeout(Duration::from_millis(50), changes.next()).await;
        }
        assert_eq!(cache.instances()[0], full_instance("api", "a"));

        // Round robin: each in turn. Sticky: one, until it goes. Random: one of them.
        let picks: Vec<String> = (0..6).map(|_| round.instance().unwrap().id).collect();
        assert_eq!(picks, ["a", "b", "c", "a", "b", "c"]);
        let first = sticky.instance().unwrap().id;
        for _ in 0..5 {
            assert_eq!(sticky.instance().unwrap().id, first);
        }
        for _ in 0..20 {
            let id = random.instance().unwrap().id;
            assert!(["a", "b", "c"].contains(&id.as_str()));
        }
        let index = ["a", "b", "c"].iter().position(|id| *id == first).unwrap();
        regs.remove(index).unregister().await.unwrap();
        let deadline = Instant::now() + STEP;
        while sticky.all_instances().len() != 2 {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let second = sticky.instance().unwrap().id;
        assert_ne!(second, first);
        assert_eq!(sticky.instance().unwrap().id, second);

        for reg in regs {
            reg.unregister().await.unwrap();
        }
        let deadline = Instant::now() + STEP;
        while !cache.instances().is_empty() {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        client.close().await.unwrap();
    })
    .await
    .expect("bounded");
}

/// Polls until our `ServiceCache` holds exactly the ids `want` (sorted).
async fn wait_for_cached(cache: &ServiceCache, want: &[&str]) {
    poll_until!(STEP, Duration::from_millis(20), {
        let mut ids: Vec<String> = cache.instances().into_iter().map(|i| i.id).collect();
        ids.sort();
        if ids == want {
            Ok(())
        } else {
            Err(format!("our cache: {ids:?}, not {want:?}"))
        }
    });
}

/// Instances of both sides under one name: Curator's round-robin `ServiceProvider` picks
/// among all of them; both sides' caches follow a killed session's instance away and a
/// renewed session's instance back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_picks_among_mixed_instances_and_both_caches_follow_kills_and_renewals() {
    let program =
        tokio::task::block_in_place(|| CURATOR_DISCOVERY.compile_against(&discovery_classpath()));
    tokio::time::timeout(6 * STEP, async {
        let (cs, [watcher, plain]) = fresh_clients("discovery_mixed", T).await;
        let renewing = connect_renewing(&cs, T).await;
        let _doomed = ServiceDiscovery::new(plain.clone(), "/services")
            .register(full_instance("api", "zk-doomed"))
            .await
            .unwrap();
        let phoenix = ServiceDiscovery::new(renewing.clone(), "/services")
            .register(full_instance("api", "zk-phoenix"))
            .await
            .unwrap();
        // Disabled (Curator 5's `enabled`): registered, and left out by every provider.
        let mut draining = full_instance("api", "zk-draining");
        draining.enabled = false;
        let draining = ServiceDiscovery::new(watcher.clone(), "/services")
            .register(draining)
            .await
            .unwrap();
        let mut curator = CURATOR_DISCOVERY.start(&program, &[&cs, "/services"]).await;
        assert_eq!(curator.ask("REGISTER api java-1", STEP).await, "OK");
        let discovery = ServiceDiscovery::new(watcher.clone(), "/services");
        let (ours, _changes) = ServiceCache::start(&discovery, "api").await.unwrap();
        let registered = ["java-1", "zk-doomed", "zk-draining", "zk-phoenix"];
        wait_for_cached(&ours, &registered).await;
        wait_for_curator_cache(&mut curator, "api", &registered).await;
        let all = ["java-1", "zk-doomed", "zk-phoenix"];
        let provider = ServiceProvider::start(&discovery, "api", ProviderStrategy::RoundRobin)
            .await
            .unwrap();
        let mut offered: Vec<String> = provider.all_instances().into_iter().map(|i| i.id).collect();
        offered.sort();
        assert_eq!(offered, all, "ours leaves the disabled instance out");

        // Curator's provider picks each of the three enabled ones, ours and theirs, in turn,
        // and never the disabled one.
        let deadline = Instant::now() + STEP;
        loop {
            let line = curator.ask("PICK api 6", STEP).await;
            let mut picked: Vec<&str> = line.split(' ').skip(1).collect();
            assert!(
                !picked.contains(&"zk-draining"),
                "Curator picked it: {line}"
            );
            picked.sort();
            picked.dedup();
            if picked == all {
                break;
            }
            assert!(Instant::now() < deadline, "Curator's picks: {line}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // A killed session's instance leaves both caches; a renewed one comes back to both.
        kill_client_session(&plain).await.unwrap();
        let old = renewing.session_id();
        kill_client_session(&renewing).await.unwrap();
        let deadline = Instant::now() + STEP;
        while renewing.session_id() == old {
            assert!(Instant::now() < deadline, "not renewed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let after = ["java-1", "zk-draining", "zk-phoenix"];
        wait_for_cached(&ours, &after).await;
        wait_for_curator_cache(&mut curator, "api", &after).await;
        let (_, stat) = watcher.get_data("/services/api/zk-phoenix").await.unwrap();
        assert_eq!(stat.ephemeral_owner, renewing.session_id(), "re-registered");

        assert_eq!(curator.ask("UNREGISTER", STEP).await, "OK");
        phoenix.unregister().await.unwrap();
        draining.unregister().await.unwrap();
        wait_for_cached(&ours, &[]).await;
        wait_for_curator_cache(&mut curator, "api", &[]).await;
        for c in [watcher, renewing] {
            c.close().await.unwrap();
        }
    })
    .await
    .expect("bounded");
}

/// A provider leaves out an instance its caller noted errors for, by the down-instance
/// policy: from the threshold until the timeout after the first error; with every instance
/// down it has none to give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_leaves_out_noted_instances_until_the_policy_timeout() {
    tokio::time::timeout(4 * STEP, async {
        let (_, [client]) = fresh_clients("discovery_down", T).await;
        let discovery = ServiceDiscovery::new(client.clone(), "/services");
        let a = discovery.register(full_instance("api", "a")).await.unwrap();
        let b = discovery.register(full_instance("api", "b")).await.unwrap();
        let timeout = Duration::from_millis(800);
        let provider = ServiceProvider::start(&discovery, "api", ProviderStrategy::RoundRobin)
            .await
            .unwrap()
            .with_down_instance_policy(DownInstancePolicy::new(timeout, 2));
        let deadline = Instant::now() + STEP;
        while provider.all_instances().len() < 2 {
            assert!(Instant::now() < deadline, "the cache never saw both");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let picks = |n| {
            let mut ids: Vec<String> = (0..n)
                .map(|_| provider.instance().map_or("-".into(), |i| i.id))
                .collect();
            ids.sort();
            ids.dedup();
            ids
        };
        assert_eq!(picks(4), ["a", "b"]);
        let first_error = Instant::now();
        let instance_a = a.instance().clone();
        provider.note_error(&instance_a);
        assert_eq!(picks(4), ["a", "b"], "one error is under the threshold");
        provider.note_error(&instance_a);
        assert_eq!(picks(4), ["b"], "two errors: a is down");
        provider.note_error(b.instance());
        provider.note_error(b.instance());
        assert_eq!(provider.instance(), None, "every instance down");
        tokio::time::sleep(
            timeout.saturating_sub(first_error.elapsed()) + Duration::from_millis(100),
        )
        .await;
        assert_eq!(picks(4), ["a", "b"], "back after the timeout");
        a.unregister().await.unwrap();
        b.unregister().await.unwrap();
        client.close().await.unwrap();
    })
    .await
    .expect("bounded");
}
