"""Audio: probing, converting and resampling (PyAV)."""
