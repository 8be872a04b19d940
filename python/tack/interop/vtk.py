"""Zero-copy exchange between Tack arrays and VTK data arrays."""
