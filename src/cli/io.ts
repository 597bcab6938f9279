/** Where a command writes: the process's stdout and stderr, or a test's buffers. */
export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
}
