"""Accept headers that ask the API server for PartialObjectMetadata: names and
metadata only, so a Secret's data never reaches the process that lists it."""

METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONLY_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
