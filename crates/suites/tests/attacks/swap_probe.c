/* Swaps the folder `b` (another thread's workspace) with a symlink to the folder
 * given as argv[1] (agentplane's configuration), atomically and as fast as it can,
 * for argv[2] seconds; leaves `b` a folder again and prints how often it swapped. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    unlink("link");
    if (symlink(argv[1], "link") != 0) { perror("symlink"); return 1; }
    time_t end = time(NULL) + atoi(argv[2]);
    long swaps = 0, failed = 0;
    while (time(NULL) < end) {
        for (int i = 0; i < 1000; i++) {
            if (renameat2(AT_FDCWD, "b", AT_FDCWD, "link", RENAME_EXCHANGE) == 0) swaps++;
            else failed++;
        }
    }
    if (swaps % 2 && renameat2(AT_FDCWD, "b", AT_FDCWD, "link", RENAME_EXCHANGE) == 0) swaps++;
    printf("swaps: %ld\nfailed: %ld\n", swaps, failed);
    return 0;
}
