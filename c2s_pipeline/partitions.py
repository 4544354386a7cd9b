from dagster import DynamicPartitionsDefinition

# One partition per corpus; `c2s compile` adds the key if it is missing.
corpus_partitions = DynamicPartitionsDefinition(name="corpus")
