/* fuzz_rst.c - kb_parse_rst on any bytes, then the chunker over what it made. */
#include "ingest/ingest_int.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_parse_and_chunk(kb_parse_rst, "fuzz.rst", data, size);
    return 0;
}
