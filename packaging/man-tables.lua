-- pandoc filter for the man pages (scripts/package). A man page has no room for a wide table,
-- so each row becomes an item of a definition list (.TP): its first cell the term, each other
-- cell a paragraph headed by its column's name.
function Table(t)
  local heads = {}
  for i, cell in ipairs(t.head.rows[1].cells) do
    heads[i] = pandoc.utils.stringify(cell.contents)
  end
  local items = {}
  for _, body in ipairs(t.bodies) do
    for _, row in ipairs(body.body) do
      local def = {}
      for i = 2, #row.cells do
        local text = pandoc.utils.blocks_to_inlines(row.cells[i].contents)
        if #text > 0 then
          local head = pandoc.List({pandoc.Emph({pandoc.Str(heads[i] .. ":")}), pandoc.Space()})
          table.insert(def, pandoc.Para(head .. text))
        end
      end
      table.insert(items, {pandoc.utils.blocks_to_inlines(row.cells[1].contents), {def}})
    end
  end
  return pandoc.DefinitionList(items)
end

-- A long inline code span (a JSON line) may break after each of its commas.
function Code(c)
  if #c.text <= 30 then
    return nil
  end
  local out = pandoc.List()
  for piece in c.text:gmatch("[^,]+,?") do
    if #out > 0 then
      out:insert(pandoc.RawInline("man", "\\:"))
    end
    out:insert(pandoc.Code(piece))
  end
  return out
end
