//! The embedded font, and a `DrawingBackend` decorator that places its glyphs correctly.
//!
//! plotters 0.3.7 draws `ab_glyph` text without each glyph's left side bearing, so
//! letters drift apart and together ("GE T", "pa yload"). [`GlyphText`] wraps a backend
//! and lays text out with `ab_glyph` itself (advances, kerning, glyphs placed at their
//! outline bounds); every other call goes straight to the wrapped backend. Sizes and
//! anchors keep plotters' meaning: a `size` of N px makes ascent + descent N px tall.

use std::sync::{LazyLock, Once};

use ab_glyph::{point, Font, FontRef, Glyph, PxScale, ScaleFont};
use plotters::style::FontStyle;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

/// DejaVu Sans; see `assets/LICENSE-DejaVu.txt`.
static FONT_TTF: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// The family plotters asks for by default (axis labels, legend), so all text finds it.
pub(crate) const FONT_FAMILY: &str = "sans-serif";

static FONT: LazyLock<FontRef<'static>> = LazyLock::new(|| {
    // The bytes are compiled in, so failure is a build bug, not an input error.
    FontRef::try_from_slice(FONT_TTF).expect("embedded DejaVuSans.ttf does not parse")
});

/// Registers the embedded font with plotters' `ab_glyph` font table, once per process,
/// for the plotters paths that measure text without asking the backend.
pub(crate) fn register_font() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        let parsed = plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT_TTF);
        assert!(parsed.is_ok(), "embedded DejaVuSans.ttf does not parse");
    });
}

/// Glyphs positioned for one line of text, with its top-left corner at (0, 0).
struct Layout {
    glyphs: Vec<Glyph>,
    width_px: f32,
    height_px: f32,
}

fn layout(text: &str, size_px: f64) -> Layout {
    let font = FONT.as_scaled(PxScale::from(size_px as f32));
    let mut glyphs = Vec::with_capacity(text.len());
    let mut caret_px = 0.0;
    let mut previous = None;
    for c in text.chars().filter(|c| !c.is_control()) {
        let id = font.glyph_id(c);
        if let Some(previous) = previous {
            caret_px += font.kern(previous, id);
        }
        glyphs.push(id.with_scale_and_position(font.scale(), point(caret_px, font.ascent())));
        caret_px += font.h_advance(id);
        previous = Some(id);
    }
    Layout {
        glyphs,
        width_px: caret_px,
        height_px: font.height(),
    }
}

/// Wraps a plotters backend so that its text is drawn by [`layout`].
pub(crate) struct GlyphText<B> {
    inner: B,
}

impl<B> GlyphText<B> {
    pub(crate) fn new(inner: B) -> Self {
        GlyphText { inner }
    }
}

impl<B: DrawingBackend> DrawingBackend for GlyphText<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<B::ErrorType>> {
        let layout = layout(text, style.size());
        Ok((
            layout.width_px.ceil() as u32,
            layout.height_px.ceil() as u32,
        ))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let layout = layout(text, style.size());
        let (width_px, height_px) = (
            layout.width_px.ceil() as i32,
            layout.height_px.ceil() as i32,
        );
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0,
            HPos::Center => -width_px / 2,
            HPos::Right => -width_px,
        };
        let dy = match anchor.v_pos {
            VPos::Top => 0,
            VPos::Center => -height_px / 2,
            VPos::Bottom => -height_px,
        };
        let transform = style.transform();
        for glyph in layout.glyphs {
            let Some(outline) = FONT.outline_glyph(glyph) else {
                continue; // Blank glyphs (spaces) have no outline.
            };
            let bounds = outline.px_bounds();
            let mut result = Ok(());
            outline.draw(|gx, gy, coverage| {
                if result.is_err() || coverage <= 0.0 {
                    return;
                }
                let x = bounds.min.x as i32 + gx as i32 + dx;
                let y = bounds.min.y as i32 + gy as i32 + dy;
                let (x, y) = transform.transform(x, y);
                let shade = BackendColor {
                    alpha: color.alpha * f64::from(coverage.min(1.0)),
                    rgb: color.rgb,
                };
                result = self.inner.draw_pixel((pos.0 + x, pos.1 + y), shade);
            });
            result?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_advances_and_measures() {
        let one = layout("x", 20.0);
        let two = layout("xx", 20.0);
        assert!(one.width_px > 5.0 && (two.width_px - 2.0 * one.width_px).abs() < 0.01);
        assert!((one.height_px - 20.0).abs() < 0.5, "{}", one.height_px);
        assert_eq!(layout("", 20.0).width_px, 0.0);
        assert_eq!(layout("a\nb", 20.0).glyphs.len(), 2);
    }
}
