//! Hostile packages (found by or written for the `chart_parse` fuzz
//! target): huge tar headers, names that climb out of the chart.

use std::io::Write;

use crate::chart::parse_chart;
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
