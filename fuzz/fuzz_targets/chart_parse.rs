//! The chart server's package parser (`chart_index::chart`): gzip, tar and Chart.yaml. Raw bytes, and tar
//! archives built from the input with hostile parts: names that climb out
//! (`../`), absolute or empty, declared sizes that lie, GNU long names
//! and pax headers (huge ones too: a run of zeros, which gzip shrinks to
//! almost nothing), entries of every type, archives cut short. Never a
//! panic; what it allocates stays bounded (run.sh runs it with
//! `-malloc_limit_mb`); a chart that parses has a name and version that
//! are safe file names.
#![no_main]

use std::io::Write;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

use chart_index::{chart, storage, ustar};

#[derive(Arbitrary, Debug)]
enum Input {
    Raw(Vec<u8>),
    Tar(Tar),
}

#[derive(Arbitrary, Debug)]
struct Tar {
    entries: Vec<Entry>,
    /// Leave out the two zero blocks that end an archive.
    no_end: bool,
    /// Cut the gzip stream to this many bytes.
    cut: Option<u16>,
}

#[derive(Arbitrary, Debug)]
struct Entry {
    name: Vec<Piece>,
    kind: Kind,
    /// A size to declare instead of the data's.
    declared: Option<u32>,
    body: Body,
    /// A GNU long name entry (or pax header) naming it, before it.
    long: Option<Long>,
}

#[derive(Arbitrary, Debug)]
enum Piece {
    Chart,
    ChartYaml,
    Requirements,
    Parent,
    Current,
    Empty,
    Root,
    Text(String),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Kind {
    File,
    Dir,
    Symlink,
    Hardlink,
    GnuLongName,
    GnuLongLink,
    Pax,
    PaxGlobal,
    Other(u8),
}

impl Kind {
    fn flag(self) -> u8 {
        match self {
            Kind::File => b'0',
            Kind::Dir => b'5',
            Kind::Symlink => b'2',
            Kind::Hardlink => b'1',
            Kind::GnuLongName => b'L',
            Kind::GnuLongLink => b'K',
            Kind::Pax => b'x',
            Kind::PaxGlobal => b'g',
            Kind::Other(b) => b,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Body {
    Bytes(Vec<u8>),
    /// A Chart.yaml: these fields, then the text.
    Yaml {
        name: String,
        version: String,
        api: bool,
        tail: String,
    },
    /// This many 512 KiB of zeros (up to ~128 MiB).
    Zeros(u8),
}

#[derive(Arbitrary, Debug)]
enum Long {
    GnuName,
    Pax,
    /// A GNU long name of this many 512 KiB of zeros then the name.
    HugeGnuName(u8),
    /// A pax header of this many 512 KiB of zeros.
    HugePax(u8),
}

fn name_of(pieces: &[Piece]) -> String {
    let parts: Vec<&str> = pieces
        .iter()
        .take(6)
        .map(|p| match p {
            Piece::Chart => "mychart",
            Piece::ChartYaml => "Chart.yaml",
            Piece::Requirements => "requirements.yaml",
            Piece::Parent => "..",
            Piece::Current => ".",
            Piece::Empty => "",
            Piece::Root => "/",
            Piece::Text(t) => t.as_str(),
        })
        .collect();
    parts.join("/")
}

/// An entry's data: bytes, then this many 512 KiB of zeros.
struct Data(Vec<u8>, u8);

/// Writes the archive straight into the gzip encoder: the runs of zeros
/// are never held whole, so that the malloc limit catches the parser's
/// allocations, not the harness's.
struct Out {
    gz: flate2::write::GzEncoder<Vec<u8>>,
    len: u64,
}

impl Out {
    fn write(&mut self, b: &[u8]) {
        self.gz.write_all(b).expect("in memory");
        self.len += b.len() as u64;
    }

    fn entry(&mut self, name: &[u8], flag: u8, declared: Option<u64>, data: &Data) {
        let zeros = u64::from(data.1) << 19;
        let size = data.0.len() as u64 + zeros;
        self.write(&ustar::header(name, flag, declared.unwrap_or(size)));
        let block = [0u8; 1 << 16];
        for _ in 0..zeros >> 16 {
            self.write(&block);
        }
        self.write(&data.0);
        let pad = self.len.div_ceil(512) * 512 - self.len;
        self.write(&block[..pad as usize]);
    }
}

fn build(tar: &Tar) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut out = Out { gz, len: 0 };
    for e in tar.entries.iter().take(8) {
        let name = name_of(&e.name);
        match &e.long {
            None => {}
            Some(Long::GnuName) => out.entry(
                b"././@LongLink",
                b'L',
                None,
                &Data(name.clone().into_bytes(), 0),
            ),
            Some(Long::Pax) => {
                let rec = format!("path={name}\n");
                let rec = format!(
                    "{} {rec}",
                    rec.len() + 1 + (rec.len() + 1).to_string().len()
                );
                out.entry(b"PaxHeaders/x", b'x', None, &Data(rec.into_bytes(), 0));
            }
            Some(Long::HugeGnuName(n)) => out.entry(
                b"././@LongLink",
                b'L',
                None,
                &Data(name.clone().into_bytes(), *n),
            ),
            Some(Long::HugePax(n)) => out.entry(b"PaxHeaders/x", b'x', None, &Data(Vec::new(), *n)),
        }
        let data = match &e.body {
            Body::Bytes(b) => Data(b.clone(), 0),
            Body::Yaml {
                name,
                version,
                api,
                tail,
            } => {
                let api = if *api { "apiVersion: v2\n" } else { "" };
                Data(
                    format!("{api}name: {name}\nversion: {version}\n{tail}").into_bytes(),
                    0,
                )
            }
            Body::Zeros(n) => Data(Vec::new(), *n),
        };
        out.entry(
            name.as_bytes(),
            e.kind.flag(),
            e.declared.map(u64::from),
            &data,
        );
    }
    if !tar.no_end {
        out.write(&[0; 1024]);
    }
    let mut bytes = out.gz.finish().expect("in memory");
    if let Some(cut) = tar.cut {
        bytes.truncate(usize::from(cut));
    }
    bytes
}

fuzz_target!(|input: Input| {
    let bytes = match &input {
        Input::Raw(b) => b.clone(),
        Input::Tar(t) => build(t),
    };
    if let Ok((meta, _version)) = chart::parse_chart(&bytes) {
        assert!(storage::safe_name(&meta.name), "{:?}", meta.name);
        assert!(storage::safe_name(&meta.version), "{:?}", meta.version);
    }
});
