/* Wine 8.0 has no ProcessPrng in bcryptprimitives.dll, which Rust's
 * standard library (1.78 and later) imports on Windows for its random
 * numbers (HashMap seeds). This stand-in forwards to advapi32's
 * RtlGenRandom (SystemFunction036), which Wine has. Built by .ci/windows
 * with the mingw compiler and put in the Wine prefix's system32. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
