//! Checks shared by the chart tests: the file is a whole, decodable 800x500 PNG with
//! something drawn on it, and no `.partial` file is left beside it.

use std::path::Path;

use locus_plot::{HEIGHT_PX, WIDTH_PX};

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// Decodes `path` and returns how many pixels are not white.
pub fn assert_png(path: &Path) -> usize {
    let bytes = std::fs::read(path).expect("chart file exists");
    assert_eq!(bytes[..8], PNG_SIGNATURE, "{}: not a PNG", path.display());
    // A blank 800x500 image compresses to ~2 KB; axes and text make it larger.
    assert!(
        (4_000..1_000_000).contains(&bytes.len()),
        "{}: implausible size {} bytes",
        path.display(),
        bytes.len()
    );
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .expect("PNG header decodes");
    let mut rgb = vec![0; reader.output_buffer_size().expect("sane image size")];
    let info = reader.next_frame(&mut rgb).expect("PNG data decodes");
    assert_eq!((info.width, info.height), (WIDTH_PX, HEIGHT_PX));
    assert_eq!(info.color_type, png::ColorType::Rgb);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let inked = rgb[..info.buffer_size()]
        .chunks_exact(3)
        .filter(|px| px != &[255, 255, 255])
        .count();
    assert!(
        inked > 1_000,
        "{}: almost blank ({inked} px)",
        path.display()
    );
    assert_no_partial(path);
    inked
}

/// No `PATH.partial` is left next to `path`.
pub fn assert_no_partial(path: &Path) {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    assert!(!Path::new(&partial).exists(), "{partial:?} left behind");
}
