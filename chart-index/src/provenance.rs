//! Provenance files (`helm package --sign`'s `<chart>.tgz.prov`): which
//! chart version one is for.
//!
//! A provenance file is a PGP clear-signed text: the chart's Chart.yaml,
//! then `...` and the package's digest, then the signature. As chartmuseum
//! does, the file is taken for the chart named by the first `name:` and
//! `version:` lines at the start of a line of the signed text (the signature
//! itself is not checked: that is `helm verify`'s business, with the
//! signer's key). Both must be plain names ([`safe_name`]): they make the
//! file's name, `<name>-<version>.tgz.prov`.

use crate::storage::safe_name;

const SIGNED: &str = "-----BEGIN PGP SIGNED MESSAGE-----";
const SIGNATURE: &str = "-----BEGIN PGP SIGNATURE-----";

/// The chart `(name, version)` a provenance file is for, or why it is no
/// provenance file.
pub fn prov_chart(bytes: &[u8]) -> Result<(String, String), String> {
    let not = |why: &str| format!("not a provenance file (as `helm package --sign` makes): {why}");
    let text = std::str::from_utf8(bytes).map_err(|_| not("not UTF-8 text"))?;
    let signed = text
        .strip_prefix(SIGNED)
        .ok_or_else(|| not(&format!("it does not start with {SIGNED:?}")))?;
    let signed = signed.split(SIGNATURE).next().unwrap_or(signed);
    let field = |key: &str| -> Result<String, String> {
        let line = signed
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(':')))
            .ok_or_else(|| not(&format!("no {key:?} line in its signed text")))?;
        let v = line.trim();
        let v = [('"', '"'), ('\'', '\'')]
            .iter()
            .find_map(|&(open, close)| v.strip_prefix(open).and_then(|v| v.strip_suffix(close)))
            .unwrap_or(v);
        if safe_name(v) {
            Ok(v.to_owned())
        } else {
            Err(format!(
                "the provenance file's {key} {v:?} is not accepted: use letters, digits, '.', \
                 '_', '-', '+', not starting with '.' nor containing '..'"
            ))
        }
    };
    Ok((field("name")?, field("version")?))
}

#[cfg(test)]
mod tests {
    use super::prov_chart;

    #[test]
    fn the_chart_a_provenance_file_is_for() {
        let prov = "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\napiVersion: v2\n\
                    dependencies:\n- name: dep\n  version: 9.9.9\nname: mychart\n\
                    version: \"0.1.0\"\n\n...\nfiles:\n  mychart-0.1.0.tgz: sha256:00\n\
                    -----BEGIN PGP SIGNATURE-----\n\nname: evil\n-----END PGP SIGNATURE-----\n";
        assert_eq!(
            prov_chart(prov.as_bytes()),
            Ok(("mychart".into(), "0.1.0".into()))
        );
        for (bad, says) in [
            (&b"\x1f\x8b\x08 a package"[..], "UTF-8"),
            (b"name: x\nversion: 1.0.0\n", "does not start"),
            (b"-----BEGIN PGP SIGNED MESSAGE-----\nname: x\n", "\"version\""),
            (
                b"-----BEGIN PGP SIGNED MESSAGE-----\nversion: 1\n-----BEGIN PGP SIGNATURE-----\nname: x\n",
                "\"name\"",
            ),
            (
                b"-----BEGIN PGP SIGNED MESSAGE-----\nname: ../x\nversion: 1.0.0\n",
                "name \"../x\"",
            ),
        ] {
            let e = prov_chart(bad).unwrap_err();
            assert!(e.contains(says), "{e:?} says {says:?}");
        }
    }
}
