/** Reads a child process's stdout as JSON lines (other lines, e.g. logs, are ignored). */
export function onJsonLines<T>(stream: NodeJS.ReadableStream, onObject: (value: T) => void): void {
  let buffered = '';
  stream.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    let newline: number;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (line.startsWith('{')) onObject(JSON.parse(line) as T);
    }
  });
}
