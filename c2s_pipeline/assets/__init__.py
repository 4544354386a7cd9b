"""The compile stages as Dagster assets, partitioned by corpus."""
