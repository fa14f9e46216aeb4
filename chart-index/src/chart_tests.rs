//! Hostile packages (found by or written for the `chart_parse` fuzz
//! target): huge tar headers, names that climb out of the chart.

use std::io::Write;

use crate::chart::{parse_chart, read_package, sha256_hex};
use crate::ustar::push;

/// A gzip'd tar of `(name, type flag, data)` entries, written by hand (the
/// tar crate's builder refuses `..`).
fn tgz(entries: &[(&str, u8, &[u8])]) -> Vec<u8> {
    let mut tar = Vec::new();
    for (name, flag, data) in entries {
        push(&mut tar, name.as_bytes(), *flag, None, data);
    }
    tar.extend_from_slice(&[0; 1024]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    gz.finish().unwrap()
}

const CHART: &[u8] = b"apiVersion: v2\nname: mychart\nversion: 1.0.0\n";

/// The tar crate reads a GNU long name or a pax header whole into memory:
/// 2 MiB of zeros declared as one (a few KiB gzip'd) would be allocated
/// (up to 1 GiB, the unpacked bound). Refused before the archive is read
/// for its entries; a long name of a usual size still works.
#[test]
fn a_huge_tar_extension_header_is_refused_before_it_is_read_whole() {
    let zeros = vec![0u8; 2 << 20];
    for flag in [b'L', b'K', b'x', b'g'] {
        let bytes = tgz(&[
            ("././@LongLink", flag, &zeros),
            ("mychart/Chart.yaml", b'0', CHART),
        ]);
        assert!(bytes.len() < 16 << 10, "gzip shrinks it: {}", bytes.len());
        let e = parse_chart(&bytes).unwrap_err();
        assert!(e.contains("larger than 1 MiB"), "{}: {e}", flag as char);
    }
    let long = format!("mychart/{}/../Chart.yaml", "d".repeat(200));
    let mut name = long.into_bytes();
    name.push(0);
    let ok = tgz(&[("././@LongLink", b'L', &name), ("x", b'0', b"")]);
    assert!(parse_chart(&ok).is_err_and(|e| e.contains("no Chart.yaml")));
    let mut name = b"mychart/Chart.yaml".to_vec();
    name.push(0);
    let ok = tgz(&[("././@LongLink", b'L', &name), ("x", b'0', CHART)]);
    assert_eq!(
        parse_chart(&ok).unwrap().0.name,
        "mychart",
        "a long name names the entry"
    );
}

/// A Chart.yaml anywhere but `<chart>/Chart.yaml` is not the chart's:
/// names with `..`, absolute ones, deeper ones, are passed over.
#[test]
fn a_chart_yaml_outside_its_chart_directory_is_not_read() {
    for name in [
        "../Chart.yaml",
        "mychart/../Chart.yaml",
        "/mychart/Chart.yaml",
        "../mychart/Chart.yaml",
        "mychart/sub/Chart.yaml",
        "Chart.yaml",
    ] {
        let e = parse_chart(&tgz(&[(name, b'0', CHART)])).unwrap_err();
        assert!(e.contains("no Chart.yaml"), "{name}: {e}");
    }
    let ok = tgz(&[("./mychart/./Chart.yaml", b'0', CHART)]);
    assert_eq!(parse_chart(&ok).unwrap().0.name, "mychart");
}

/// A package read from its file in chunks (several of them here, with
/// bytes that do not compress) has the digest of its bytes and the
/// metadata of its Chart.yaml; read again with that entry known, it is
/// only hashed, not parsed.
#[test]
fn a_package_is_hashed_and_parsed_from_its_file_in_chunks() {
    let mut noise = Vec::with_capacity(300_000);
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    while noise.len() < 300_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    let bytes = tgz(&[
        ("mychart/Chart.yaml", b'0', CHART),
        ("mychart/blob", b'0', &noise),
    ]);
    assert!(bytes.len() > 4 * (64 << 10), "{} bytes", bytes.len());
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("org")).unwrap();
    std::fs::write(root.join("org/mychart-1.0.0.tgz"), &bytes).unwrap();

    let (c, parsed) = read_package(&root, &["org"], "mychart-1.0.0.tgz", None).unwrap();
    assert!(parsed);
    assert_eq!(c.digest, sha256_hex(&bytes));
    assert_eq!(
        (c.meta.name.as_str(), c.meta.version.as_str()),
        ("mychart", "1.0.0")
    );
    assert!(c.source.is_some(), "the file did not change while read");

    let (again, parsed) = read_package(&root, &["org"], "mychart-1.0.0.tgz", Some(&c)).unwrap();
    assert!(!parsed, "known by its digest");
    assert_eq!((&again.digest, &again.meta.name), (&c.digest, &c.meta.name));

    // Cut short: the digest differs from the known one, and the parse
    // fails on the gzip stream.
    std::fs::write(
        root.join("org/mychart-1.0.0.tgz"),
        &bytes[..bytes.len() - 100],
    )
    .unwrap();
    let e = read_package(&root, &["org"], "mychart-1.0.0.tgz", Some(&c)).unwrap_err();
    assert!(e.contains("not a valid gzip'd tar archive"), "{e}");
}
