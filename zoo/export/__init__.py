"""Export: the SavedModel (`saved_model`) and the ONNX files with their runner."""
