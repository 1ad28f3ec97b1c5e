// Scenario: run tools from the forms generated from their schemas, without
// writing JSON: the demo tools (element, count with its unit, an enum, a
// fixed-size vector) and the megane-reference tools (molecule with SMILES or
// mol block, atom-of, a table of components, document), plus a tool whose
// widget this page does not know. Invalid values are refused at their field
// before anything is sent.
'use strict';
const lib = require('./lib.js');

// A small 3D V2000 mol block (ethane's carbons and one hydrogen).
const MOLBLOCK = 'ethane\n  test    3D\n\n  3  2  0  0  0  0  0  0  0  0999 V2000\n' +
  '    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n' +
  '    1.5400    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n' +
  '   -0.5000    0.9000    0.0000 H   0  0  0  0  0  0  0  0  0  0  0  0\n' +
  '  1  2  1  0\n  1  3  1  0\nM  END\n';

const field = (path) => `.field[data-path='${JSON.stringify(path)}']`;

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open({ width: 1280, height: 1100 });
  track(browser);
  const calls = () => rec.sent.filter((m) => m.type === 'tools:call');
  const lastCall = () => calls()[calls().length - 1];
  const runAndWait = async () => {
    await page.evaluate(() => { delete document.getElementById('result').dataset.outcome; });
    await page.click('#run');
    await page.waitForSelector('#result[data-outcome]', { timeout: 60000 });
    return page.evaluate(() => document.getElementById('result').dataset.outcome);
  };
  const out = {};

  // gas_box: the element picker takes a symbol, count carries no unit text.
  await lib.connect(page, 'demo-tools', { confirm: true });
  await lib.selectTool(page, 'demo-tools', 'gas_box');
  out.advancedOpen = await page.evaluate(() => document.getElementById('advanced').open);
  out.gasLabels = await page.$$eval('#args-form .field > .field-label', (ls) => ls.map((l) => l.textContent));
  out.elementShown = await page.inputValue(field(['element']) + ' input');
  out.elementOther = await page.textContent(field(['element']) + ' .element-other');
  out.densityUnit = await page.textContent(field(['density']) + ' .unit');
  // Out of range: refused at the field, nothing sent.
  await page.fill(field(['count']) + ' input', '0');
  const before = calls().length;
  await page.click('#run');
  out.countError = await page.textContent(field(['count']) + ' .field-error');
  out.countInvalid = await page.getAttribute(field(['count']) + ' input', 'aria-invalid');
  out.focusedAfterError = await page.evaluate(() => document.activeElement.closest('.field') && document.activeElement.closest('.field').dataset.path);
  out.sentWhileInvalid = calls().length - before;
  await page.fill(field(['count']) + ' input', '40');
  out.countErrorAfterFix = await page.isVisible(field(['count']) + ' .field-error');
  await page.fill(field(['element']) + ' input', 'Ne');
  out.gasOutcome = await runAndWait();
  out.gasArgs = lastCall().arguments;
  out.gasAtoms = await page.textContent('#result-summary dd.atoms');

  // crystal: an enum as a select and a fixed-size vector.
  await lib.selectTool(page, 'demo-tools', 'crystal');
  await page.selectOption(field(['lattice']) + ' select', 'bcc');
  await page.fill(field(['repeats']) + ' input >> nth=2', '1');
  out.crystalOutcome = await runAndWait();
  out.crystalArgs = lastCall().arguments;

  // The reference tools: polymer_chain with its example SMILES, then a mol
  // block whose atoms the atom widgets list.
  await lib.connect(page, 'reference', { confirm: true });
  await lib.selectTool(page, 'reference', 'polymer_chain');
  out.monomerName = await page.inputValue(field(['monomer']) + ' input[type=text] >> nth=0');
  out.monomerSmiles = await page.inputValue(field(['monomer']) + " input[aria-label$='SMILES']");
  out.requiredMarks = await page.$$eval('#args-form .field', (fs) => fs.filter((f) => f.querySelector(':scope > label .req')).map((f) => JSON.parse(f.dataset.path).join('.')));
  out.headPlain = await page.isVisible(field(['head']) + ' select');
  await page.fill(field(['monomer']) + ' input[type=text] >> nth=0', '');
  await page.click('#run');
  out.nameError = await page.textContent(field(['monomer']) + ' .field-error >> nth=0');
  await page.fill(field(['monomer']) + ' input[type=text] >> nth=0', 'ethane');
  await page.selectOption(field(['monomer']) + ' select', 'molblock');
  await page.fill(field(['monomer']) + ' textarea', MOLBLOCK);
  out.headOptions = await page.$$eval(field(['head']) + ' select option', (os) => os.map((o) => o.textContent));
  await page.selectOption(field(['tail']) + ' select', '1');
  out.axePolymer = await lib.axe(page);
  out.polymerOutcome = await runAndWait();
  out.polymerArgs = lastCall().arguments;
  out.polymerAtoms = await page.textContent('#result-summary dd.atoms');

  // liquid_box: a table of components, one row more.
  await lib.selectTool(page, 'reference', 'liquid_box');
  out.rowsBefore = await page.$$eval(field(['components']) + ' fieldset.table-row', (r) => r.length);
  await page.click(field(['components']) + ' button.add-row');
  for (const [i, name, smiles] of [[0, 'water', 'O'], [1, 'ethanol', 'CCO']]) {
    await page.fill(field(['components', i, 'molecule']) + ' input[type=text] >> nth=0', name);
    await page.fill(field(['components', i, 'molecule']) + " input[aria-label$='SMILES']", smiles);
  }
  await page.fill(field(['components', 1, 'count']) + ' input', '20');
  out.axeLiquid = await lib.axe(page);
  out.liquidOutcome = await runAndWait();
  out.liquidArgs = lastCall().arguments;

  // solvate: the document is required; the last result can be used.
  await lib.selectTool(page, 'reference', 'solvate');
  await page.selectOption(field(['solvent']) + ' select.preset', 'water');
  await page.click('#run');
  out.documentError = await page.textContent(field(['document']) + ' .field-error');
  await page.click(field(['document']) + ' button.use-result');
  out.solvateOutcome = await runAndWait();
  out.solvent = lastCall().arguments.solvent;
  const doc = lastCall().arguments.document;
  out.solvateDocumentAtoms = doc && Array.isArray(doc.elements) ? doc.elements.length : -1;

  // A widget this page does not know: the plain control of its schema.
  await lib.selectTool(page, 'reference', 'future_widget');
  out.unknownControl = await page.$eval(field(['level']), (f) => f.querySelector('input, select, textarea').outerHTML.replace(/ id="[^"]*"| aria-[a-z]+="[^"]*"/g, ''));
  await page.fill(field(['level']) + ' input', '12');
  out.unknownError = await (async () => { await page.click('#run'); return page.textContent(field(['level']) + ' .field-error'); })();
  await page.fill(field(['level']) + ' input', '3');
  // The cell widget's orthorhombic shortcut.
  for (const [i, v] of [[0, '10'], [1, '12'], [2, '14']]) await page.fill(field(['box']) + ` input[aria-label$='orthorhombic ${'abc'[i]}']`, v);
  await page.click(field(['box']) + ' button.cell-abc');
  out.unknownOutcome = await runAndWait();
  out.unknownArgs = lastCall().arguments;
  out.advancedOpenAtEnd = await page.evaluate(() => document.getElementById('advanced').open);
  await lib.shot(page, 'form');
  return Object.assign(out, { consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors });
});
