"""The navigation engine: beam widths and weights, node scoring, ranking and fusion, shared by
the offline navigator that answers questions and the compile's navigability probe."""
