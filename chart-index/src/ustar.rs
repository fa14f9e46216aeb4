//! Tar archives written by hand, for hostile packages (the tar crate's
//! builder refuses `..` and lying sizes): the chart parser's tests and the
//! `chart_parse` fuzz target (`fuzz/`) both use it.

/// A 512-byte ustar header for `name` (its first 100 bytes), type `flag`,
/// declaring `size` bytes.
pub fn header(name: &[u8], flag: u8, size: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    let n = name.len().min(100);
    h[..n].copy_from_slice(&name[..n]);
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    let size = format!("{:011o}", size.min(0o77777777777));
    h[124..135].copy_from_slice(size.as_bytes());
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = flag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

/// Appends an entry to `tar`: its header (declaring `declared` bytes, or
/// the data's length), its data, padding to a block.
pub fn push(tar: &mut Vec<u8>, name: &[u8], flag: u8, declared: Option<u64>, data: &[u8]) {
    tar.extend_from_slice(&header(name, flag, declared.unwrap_or(data.len() as u64)));
    tar.extend_from_slice(data);
    tar.resize(tar.len().div_ceil(512) * 512, 0);
}
