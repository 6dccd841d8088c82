import { describe, expect, test } from 'vitest';
import { mimeOf, safeFileName, sendAsOf } from '../../core/files.js';

describe('safeFileName', () => {
  test.each([
    ['photo.jpg', 'photo.jpg'],
    ['../../etc/passwd', 'passwd'],
    ['C:\\Users\\ada\\report.pdf', 'report.pdf'],
    ['..', 'file'],
    ['.bashrc', 'bashrc'],
    ['', 'file'],
    ['big report (final).pdf', 'big_report_final_.pdf'],
    ['a\u202Egpj.exe', 'a_gpj.exe'],
    ['x\u0000y\n.txt', 'x_y_.txt'],
    ['$(rm -rf ~);`id`.sh', 'rm_-rf_~_id_.sh'],
  ])('%j → %j', (raw, safe) => expect(safeFileName(raw)).toBe(safe));

  test('a long name is cut to 100 characters, keeping its extension', () => {
    const name = safeFileName(`${'a'.repeat(300)}.jpeg`);
    expect(name).toHaveLength(100);
    expect(name.endsWith('.jpeg')).toBe(true);
  });
});

test('the type decides how a file is sent', () => {
  expect(sendAsOf(mimeOf('chart.PNG'))).toBe('photo');
  expect(sendAsOf(mimeOf('note.ogg'))).toBe('voice');
  expect(sendAsOf(mimeOf('paper.pdf'))).toBe('document');
  expect(sendAsOf(mimeOf('no-extension'))).toBe('document');
  expect(mimeOf('no-extension')).toBe('application/octet-stream');
});
