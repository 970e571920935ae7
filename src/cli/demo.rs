//! `floe demo DIR`: builds a small repository on the local file system — arrays with
//! different codecs (bytes, gzip, zstd, blosc, sharding, strings), a few commits, a
//! branch and a tag — then shows it the way a user would look at it: `log`, `branch
//! list`, `tag list`, `ls`, `cat` and `diff`, each printed after the command line
//! that produces it.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::args::{CatFormat, RefArgs, VirtualArgs};
use super::cat::{cat, CatRequest};
use super::target::create_repo;
use super::CliError;
use super::{history, ls, refs, CliResult};
use floe::repository::Repository;
use floe::session::Session;
use floe::zarr::{Array, ArrayBuilder, ArraySubset, DataType, Group, Store};

fn attrs(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn bytes_codec() -> Value {
    json!({"name": "bytes", "configuration": {"endian": "little"}})
}

fn store_of(session: &Session) -> Arc<dyn Store> {
    Arc::new(session.store())
}

const TIMES: u64 = 4;
const LAT: u64 = 5;
const LON: u64 = 6;

/// Temperature in kelvin at (time, lat, lon).
fn temperature(t: u64, y: u64, x: u64) -> f32 {
    270.0 + 2.0 * y as f32 + 0.5 * x as f32 + 0.25 * t as f32
}

/// The first commit: groups and arrays with different codecs.
async fn create_datasets(session: &Session) -> CliResult<()> {
    let store = store_of(session);
    Group::create(
        Arc::clone(&store),
        "",
        attrs(json!({"title": "floe demo", "created_by": "floe demo"})),
    )
    .await?;
    Group::create(
        Arc::clone(&store),
        "climate",
        attrs(json!({"source": "synthetic reanalysis"})),
    )
    .await?;
    Group::create(
        Arc::clone(&store),
        "imaging",
        attrs(json!({"instrument": "synthetic camera"})),
    )
    .await?;

    // bytes + zstd, NaN fill, named dimensions.
    let temp = ArrayBuilder::new(vec![TIMES, LAT, LON], vec![1, LAT, LON], DataType::Float32)
        .fill_value(json!("NaN"))
        .codecs(vec![
            bytes_codec(),
            json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}}),
        ])
        .dimension_names(vec![
            Some("time".into()),
            Some("lat".into()),
            Some("lon".into()),
        ])
        .attributes(attrs(json!({"units": "K", "long_name": "air temperature"})))
        .create(Arc::clone(&store), "climate/temperature")
        .await?;
    let mut values = Vec::new();
    for t in 0..TIMES {
        for y in 0..LAT {
            for x in 0..LON {
                values.push(temperature(t, y, x));
            }
        }
    }
    temp.write_region(&ArraySubset::full(temp.shape()), &values)
        .await?;

    // bytes + gzip.
    let precip = ArrayBuilder::new(vec![TIMES, LAT, LON], vec![2, LAT, 3], DataType::Float64)
        .codecs(vec![
            bytes_codec(),
            json!({"name": "gzip", "configuration": {"level": 5}}),
        ])
        .dimension_names(vec![
            Some("time".into()),
            Some("lat".into()),
            Some("lon".into()),
        ])
        .attributes(attrs(json!({"units": "mm/day"})))
        .create(Arc::clone(&store), "climate/precipitation")
        .await?;
    let rain: Vec<f64> = (0..TIMES * LAT * LON)
        .map(|i| ((i * 37) % 11) as f64 * 0.5)
        .collect();
    precip
        .write_region(&ArraySubset::full(precip.shape()), &rain)
        .await?;

    // bytes + blosc (lz4, byte shuffle).
    let ids = ArrayBuilder::new(vec![8], vec![4], DataType::Int32)
        .codecs(vec![
            bytes_codec(),
            json!({"name": "blosc", "configuration": {
                "cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}),
        ])
        .dimension_names(vec![Some("station".into())])
        .create(Arc::clone(&store), "climate/station_id")
        .await?;
    ids.write_region(
        &ArraySubset::full(ids.shape()),
        &[1001i32, 1002, 1003, 1004, 2001, 2002, 2003, 2004],
    )
    .await?;

    // Variable-length strings: vlen-utf8 + zstd.
    let names = ArrayBuilder::new(vec![8], vec![8], DataType::String)
        .dimension_names(vec![Some("station".into())])
        .create(Arc::clone(&store), "climate/station_name")
        .await?;
    let station_names: Vec<String> = [
        "Aberdeen",
        "Bergen",
        "Cork",
        "Dublin",
        "Edinburgh",
        "Faro",
        "Gdańsk",
        "Helsinki",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    names
        .write_region(&ArraySubset::full(names.shape()), &station_names)
        .await?;

    // Sharding: 8x8 shards of 4x4 inner chunks (bytes + zstd), crc32c-checked index.
    let frame = ArrayBuilder::new(vec![16, 16], vec![8, 8], DataType::UInt16)
        .codecs(vec![json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [4, 4],
            "codecs": [bytes_codec(), {"name": "zstd", "configuration": {"level": 1, "checksum": false}}],
            "index_codecs": [bytes_codec(), {"name": "crc32c"}],
            "index_location": "end"}})])
        .dimension_names(vec![Some("y".into()), Some("x".into())])
        .create(Arc::clone(&store), "imaging/frame")
        .await?;
    let pixels: Vec<u16> = (0..256u16).map(|i| (i / 16) * 100 + i % 16).collect();
    frame
        .write_region(&ArraySubset::full(frame.shape()), &pixels)
        .await?;

    // Uncompressed booleans (bytes only).
    let mask = ArrayBuilder::new(vec![16, 16], vec![16, 16], DataType::Bool)
        .codecs(vec![bytes_codec()])
        .create(Arc::clone(&store), "imaging/mask")
        .await?;
    let m: Vec<bool> = (0..256).map(|i| (i / 16 + i % 16) % 3 == 0).collect();
    mask.write_region(&ArraySubset::full(mask.shape()), &m)
        .await?;
    Ok(())
}

/// Builds the demo repository in `dir`; returns the repository.
async fn build(location: &str) -> CliResult<Repository> {
    let repo = match create_repo(location, Repository::DEFAULT_SPEC_VERSION, None).await {
        Err(CliError::Floe(floe::Error::RepositoryExists { .. })) => {
            return Err(CliError::Usage(format!(
                "`{location}` already holds a repository (from an earlier demo?): \
                 remove it or choose another directory"
            )))
        }
        other => other?,
    };

    let s = repo.writable_session("main").await?;
    create_datasets(&s).await?;
    s.commit("Create the climate and imaging datasets").await?;

    // A correction of the first time step.
    let temp = Array::open(store_of(&s), "climate/temperature").await?;
    let fixed: Vec<f32> = (0..LAT * LON)
        .map(|i| temperature(0, i / LON, i % LON) - 0.5)
        .collect();
    temp.write_region(&ArraySubset::new(vec![0, 0, 0], vec![1, LAT, LON]), &fixed)
        .await?;
    let v1 = s.commit("Recalibrate the first time step (-0.5 K)").await?;
    repo.create_tag("v1.0", v1).await?;

    // An experiment on a branch: double the precipitation, add an anomaly array.
    repo.create_branch("experiment", v1).await?;
    let e = repo.writable_session("experiment").await?;
    let precip = Array::open(store_of(&e), "climate/precipitation").await?;
    let rain: Vec<f64> = precip.read_all().await?;
    let doubled: Vec<f64> = rain.iter().map(|v| v * 2.0).collect();
    precip
        .write_region(&ArraySubset::full(precip.shape()), &doubled)
        .await?;
    let anomaly = ArrayBuilder::new(vec![LAT, LON], vec![LAT, LON], DataType::Float32)
        .attributes(attrs(json!({"units": "K"})))
        .create(store_of(&e), "climate/anomaly")
        .await?;
    let a: Vec<f32> = (0..LAT * LON).map(|i| (i as f32 - 15.0) / 10.0).collect();
    anomaly
        .write_region(&ArraySubset::full(anomaly.shape()), &a)
        .await?;
    e.commit("Experiment: double precipitation, add a temperature anomaly")
        .await?;

    // Main moves on: one more time step of temperature.
    let mut temp = Array::open(store_of(&s), "climate/temperature").await?;
    temp.resize(vec![TIMES + 1, LAT, LON]).await?;
    let step: Vec<f32> = (0..LAT * LON)
        .map(|i| temperature(TIMES, i / LON, i % LON))
        .collect();
    temp.write_region(
        &ArraySubset::new(vec![TIMES, 0, 0], vec![1, LAT, LON]),
        &step,
    )
    .await?;
    s.commit("Append time step 4 to temperature").await?;
    Ok(repo)
}

fn at(reference: &str) -> RefArgs {
    RefArgs {
        reference: reference.to_string(),
        as_of: None,
    }
}

/// Builds the demo repository in `dir` and prints its log, refs, tree, values and a
/// diff.
///
/// # Errors
/// [`floe::Error::RepositoryExists`] when `dir` holds a repository; storage errors.
pub(super) async fn demo(out: &mut impl Write, dir: &Path) -> CliResult<()> {
    let location = dir.display().to_string();
    let repo = build(&location).await?;
    writeln!(
        out,
        "Built a demo repository in {location}: 4 commits, branches main and experiment, tag v1.0.\n"
    )?;
    let q = if location.contains(char::is_whitespace) {
        format!("'{location}'")
    } else {
        location.clone()
    };

    writeln!(out, "$ floe log {q}")?;
    history::log(out, &repo, &at("main"), false, None).await?;

    writeln!(out, "$ floe branch list {q}")?;
    refs::branch(
        out,
        super::args::BranchCommand::List {
            repo: location.clone(),
            json: false,
        },
    )
    .await?;
    writeln!(out, "\n$ floe tag list {q}")?;
    refs::tag(
        out,
        super::args::TagCommand::List {
            repo: location.clone(),
            json: false,
        },
    )
    .await?;

    writeln!(out, "\n$ floe ls {q}")?;
    ls::ls(out, &location, None, &at("main"), false).await?;

    let cats: [(&str, Option<&str>, &str); 5] = [
        ("/climate/temperature", Some("0:2,0:3,:"), "main"),
        ("/climate/temperature", Some("0,0:3,:"), "v1.0"),
        ("/climate/station_name", None, "main"),
        ("/imaging/frame", Some("0:4,0:10"), "main"),
        ("/climate/anomaly", None, "experiment"),
    ];
    for (array, region, reference) in cats {
        let mut line = format!("\n$ floe cat {q} {array}");
        if reference != "main" {
            line.push_str(&format!(" --ref {reference}"));
        }
        if let Some(r) = region {
            line.push_str(&format!(" --region {r}"));
        }
        writeln!(out, "{line}")?;
        let request = CatRequest {
            array,
            region,
            format: CatFormat::Text,
        };
        cat(
            out,
            &location,
            &at(reference),
            &VirtualArgs::default(),
            &request,
        )
        .await?;
    }

    writeln!(out, "\n$ floe cat {q} /climate/station_id --format json")?;
    let request = CatRequest {
        array: "/climate/station_id",
        region: None,
        format: CatFormat::Json,
    };
    cat(
        out,
        &location,
        &at("main"),
        &VirtualArgs::default(),
        &request,
    )
    .await?;

    writeln!(out, "\n$ floe diff {q} v1.0 experiment")?;
    history::diff(out, &repo, "v1.0", "experiment", false).await?;
    writeln!(out, "\n$ floe diff {q} v1.0 main")?;
    history::diff(out, &repo, "v1.0", "main", false).await?;
    Ok(())
}
