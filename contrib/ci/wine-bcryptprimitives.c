/* Wine 8 (Debian 12's) has no bcryptprimitives.dll, which Rust's std (1.78+) imports for
 * ProcessPrng, its source of random bytes on Windows; without it a Windows build does not start
 * under that wine at all. Real Windows (10 and later) ships the DLL. This stand-in, for CI's wine
 * prefix only, gives ProcessPrng through RtlGenRandom (advapi32's SystemFunction036). */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
