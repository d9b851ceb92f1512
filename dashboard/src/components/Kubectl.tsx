import { CopyButton } from './CopyButton';

/** A kubectl command to inspect a cluster object, with a copy button. */
export function Kubectl({ command }: { command: string }) {
  return (
    <div className="kubectl">
      <code>{command}</code>
      <CopyButton text={command} label="Copy" />
    </div>
  );
}
