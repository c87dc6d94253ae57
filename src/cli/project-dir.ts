// The project directory a command line names, checked before anything opens it: the CLI's
// `--project` and the MCP server's (`opencomms mcp`, which hosts start, loads nothing else).
import { statSync } from 'node:fs';
import { refuse, RefusalError } from '../protocol/result.ts';

/** `dir` itself when it is an existing directory. A missing one would be created by the first
 *  write, somewhere nobody meant, and a file fails every read and write: both are refused
 *  (`project_not_found`, `project_not_directory`). */
export function existingDir(dir: string): string {
  let isDir: boolean;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    throw new RefusalError(
      refuse(
        'project_not_found',
        `The project directory ${dir} does not exist. Pass an existing project with --project <dir>.`,
      ),
    );
  }
  if (!isDir)
    throw new RefusalError(
      refuse(
        'project_not_directory',
        `${dir} is a file, not a directory. Pass the project's directory with --project <dir>.`,
      ),
    );
  return dir;
}
